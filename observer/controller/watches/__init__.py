"""The controller-side rules, one watch a module, each owning its trackers and state; what a
watch is, and what it is handed and hands back, is base.py. compose.py lists the watches in
the order the detect loop (detect.py) checks them."""

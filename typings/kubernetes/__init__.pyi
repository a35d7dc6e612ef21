# The parts of the official Kubernetes client (kubernetes 37) that observer.backends.kubernetes
# and the tests' emulated cluster use, as the installed client defines them; what is absent here
# is not used.

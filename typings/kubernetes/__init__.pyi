# The parts of the official Kubernetes client (kubernetes 37) that observer.backends.kubernetes
# uses, as the installed client defines them; what is absent here is not used.

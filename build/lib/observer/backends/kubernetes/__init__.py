"""The Kubernetes backend: the scheduler boundary over the Kubernetes API with the official
client; the only package that imports kubernetes."""

"""The kubelet's pod-resources API v1, vendored (api.proto, with the command that generates
the stubs) and its generated modules; only `observer.ownership.kubelet` imports them."""

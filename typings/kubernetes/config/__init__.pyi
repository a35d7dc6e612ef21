from kubernetes.client import Configuration

def load_kube_config(
    config_file: str | None = None,
    context: str | None = None,
    client_configuration: Configuration | None = None,
) -> None: ...
def load_incluster_config(client_configuration: Configuration | None = None) -> None: ...

class Job:
    id: str
    name: str

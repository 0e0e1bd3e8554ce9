"""The error a failed collective raises."""
from ..errors import DeviceError


class CollectiveError(DeviceError):
    """A collective could not run: no process group, a bad argument, or a failure or timeout inside
    torch.distributed (another rank failed or never reached it). Also a ``RuntimeError``."""

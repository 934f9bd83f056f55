"""A local, persistent, faithful stand-in of the service, for demos, tests and benchmarks."""

from connector.sandbox.app import create_app
from connector.sandbox.config import SandboxConfig, load_config
from connector.sandbox.faults import FaultSettings
from connector.sandbox.rate_limits import RateLimit

__all__ = ["FaultSettings", "RateLimit", "SandboxConfig", "create_app", "load_config"]

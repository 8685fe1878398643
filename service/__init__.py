"""bsvm's REST model server: FastAPI app around ``bsvm_core``."""

__version__ = "0.1.0"

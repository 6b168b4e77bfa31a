"""Spider middlewares of the package."""

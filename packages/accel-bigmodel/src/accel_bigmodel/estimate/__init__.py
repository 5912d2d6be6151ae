"""Memory estimates of a model per dtype, offline: from a module, a class path or a config.json
whose parameter shapes are computed without building the model.
"""

"""The bundled demo: real TileLang kernels (``kernels``) and the program that compiles them (``program``).

Importing this package imports neither TileLang nor the agent; ``kernels`` imports TileLang.
"""

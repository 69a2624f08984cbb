"""The pass of ``own_script.py`` kept in a package instead, for ``repro.py --pass-source``: its
modules import each other relatively, so they load only as modules of this package."""

"""Only for the wheel's tag: a wheel that ships the custody binary (src/custody/bin/custody) is
tagged for the building platform, so pip never installs a Linux binary on another OS; one without
it stays pure Python (py3-none-any) and finds the binary through CUSTODY_BIN or PATH."""

import os

from setuptools import setup

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools before 70.1 takes it from the wheel package
    from wheel.bdist_wheel import bdist_wheel

_SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "src", "custody", "bin",
                        "custody")


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = not os.path.exists(_SHIPPED)

    def get_tag(self):
        python, abi, plat = super().get_tag()
        if not self.root_is_pure:
            python, abi = "py3", "none"  # the Python code is version-independent
        return python, abi, plat


setup(cmdclass={"bdist_wheel": PlatformWheel})

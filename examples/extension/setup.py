"""A setuptools project whose wheel holds an openreg kernel (axpy.cpp), as a CUDAExtension's would hold a CUDA one:

    pip wheel --no-build-isolation examples/extension     # against the torch and openreg-runtime installed
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension

from openreg_runtime.cpp_extension import OpenRegExtension

setup(
    name="openreg-axpy",
    version="0.1.0",
    packages=["openreg_axpy"],
    ext_modules=[OpenRegExtension("openreg_axpy._C", ["axpy.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)

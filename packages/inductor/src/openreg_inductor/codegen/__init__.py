"""Inductor code generation for openreg: the CPU's C++ kernels, launched on openreg streams."""

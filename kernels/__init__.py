"""Triton kernels for the EAGLE-3 draft path (importable as sglang_patches.kernels).

Each kernel sits beside its launcher and its PyTorch reference.
"""

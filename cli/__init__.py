"""Thin click commands over the pgle library: parse, call one function, render, exit."""

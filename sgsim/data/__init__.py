"""Data files shipped with sgsim (see PROVENANCE.md here); read them with :mod:`sgsim.datasets`."""

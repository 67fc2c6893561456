"""Accelerated-MRI reconstruction datasets: k-space in HDF5, undersampled on load with fastMRI's
masks (``masks.py``), one shared loader (``base.py``) and one module per dataset (``skm_tea``,
``fastmri``). K-space is not a voxel grid, so these live apart from ``volumetric/``."""

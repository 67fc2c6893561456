"""2D image/mask folder datasets: one generic loader (:mod:`.folder`, ``seg2d_folder``) pairing an
image folder with a mask folder by file stem, and one module per published layout that configures
it (:mod:`.covid` COVID-SemiSeg, :mod:`.polyp` PraNet's TestDataset and Kvasir-SEG, :mod:`.isic`
ISIC 2018 Task 1, :mod:`.busi` BUSI, :mod:`.ubench` U-Bench's prepared layouts). Reading rules are
in :mod:`._io`."""

"""Text metrics: VQA answer scoring, report-generation NLG metrics, the offline CheXpert-style labeler and factuality metrics. Public names are reached through ``medimg_bench.metrics``."""

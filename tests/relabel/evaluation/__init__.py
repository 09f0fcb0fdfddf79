"""Tests of evaluation on a workspace: the evaluation passes, the reports, robustness and the golden ReaL numbers."""

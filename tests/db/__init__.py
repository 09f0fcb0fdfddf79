"""Tests of the workspace database: engine settings, migrations, immutable snapshot tables."""

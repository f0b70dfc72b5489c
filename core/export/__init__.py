"""Data out: a leaderboard's or a season's runs as Parquet, or as a Hugging Face datasets folder.

``runs`` reads the rows (one per run, in batches, anonymized unless the author opted in, code
only where anyone may see it); ``files`` writes them. pyarrow is the ``export`` extra.
"""

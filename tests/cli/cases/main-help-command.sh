bloomkit help dedup

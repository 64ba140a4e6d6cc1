"""The history's three tables, one module each: what a row holds, as explicit Arrow and Spark
types (`columns.Table`)."""

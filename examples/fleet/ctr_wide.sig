# Click-through model, wide: the same overlap feature written differently
# (operands swapped, lets inlined), plus title, category and a cross.
input overlap      = concat(intersect(unigrams(lower(col("ad_title"))), unigrams(lower(col("query")))), col("ad_category"))
input title_ids    = hash(unigrams(lower(col("ad_title"))), buckets=1000003)
input category_ids = hash(col("ad_category"), buckets=1000)
input geo_device   = cross(col("country"), col("device"), buckets=10007)
input price_bin    = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1.0, 5.0])

# Conversion model: shares query ids and price buckets with the CTR models.
let query_tokens = unigrams(lower(col("query")))
input query_ids   = hash(query_tokens, buckets=1000003, salt=0)
input advertiser  = hash(col("advertiser_id"), buckets=100003)
input price_bin   = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])
input log_price   = log1p(clip(fill_missing(col("bid_price"), default=0), lo=0, hi=1000))

# Click-through model, small: the paper's Figure 2 component plus two more.
let q      = unigrams(lower(col("query")))
let t      = unigrams(lower(col("ad_title")))
input qa_overlap = concat(intersect(q, t), col("ad_category"))
input query_ids  = hash(q, buckets=1000003)
input price_bin  = bucketize(col("bid_price"), boundaries=[0.1, 0.5, 1, 5])

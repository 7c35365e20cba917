# Ranking model: bigrams of query and title, and the overlap feature.
let q = lower(col("query"))
let t = lower(col("ad_title"))
input query_bigrams = hash(truncate(ngrams(q, n=2), max=32), buckets=1000003)
input title_bigrams = hash(truncate(ngrams(t), max=32), buckets=1000003)
input qa_overlap    = concat(intersect(unigrams(t), unigrams(q)), col("ad_category"))
input overlap_len   = length(intersect(unigrams(q), unigrams(t)))

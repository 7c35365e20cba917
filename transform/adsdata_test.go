package transform

import (
	"math"
	"math/rand"
	"strings"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// adsRecord returns n rows of deterministic Ads-like events in the Ads
// schema: queries and ad titles drawn from a Zipf-distributed vocabulary
// (some words capitalized, some punctuated, about 5% non-ASCII: accents,
// Greek, Turkish, CJK, emoji), categories, countries, devices, advertisers
// and bid prices, with a few nulls where raw data has them.
func adsRecord(mem memory.Allocator, n int, seed int64) arrow.Record {
	r := rand.New(rand.NewSource(seed))
	vocab := adsVocabulary(r, 50000)
	zipfWord := rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))
	categories := make([]string, 300)
	for i := range categories {
		categories[i] = vocab[i*7%len(vocab)] + "/" + vocab[(i*13+5)%len(vocab)]
	}
	zipfCat := rand.NewZipf(r, 1.2, 1, uint64(len(categories)-1))
	countries := []string{"US", "GB", "DE", "FR", "JP", "BR", "IN", "TR", "GR", "ES", "IT", "MX", "CA", "KR", "CN", "AU", "NL", "SE", "PL", "AR"}
	devices := []string{"mobile", "desktop", "tablet", "ctv"}
	zipfAdv := rand.NewZipf(r, 1.05, 1, 99999)

	b := array.NewRecordBuilder(mem, AdsSchema().Arrow())
	defer b.Release()
	fields := b.Fields()
	eventID := fields[0].(*array.Int64Builder)
	eventTime := fields[1].(*array.Int64Builder)
	query := fields[2].(*array.StringBuilder)
	title := fields[3].(*array.StringBuilder)
	category := fields[4].(*array.StringBuilder)
	advertiser := fields[5].(*array.Int64Builder)
	country := fields[6].(*array.StringBuilder)
	device := fields[7].(*array.StringBuilder)
	price := fields[8].(*array.Float64Builder)
	click := fields[9].(*array.Int64Builder)
	conversion := fields[10].(*array.Int64Builder)
	for _, sb := range []*array.StringBuilder{query, title} {
		sb.Reserve(n)
		sb.ReserveData(n * 40)
	}
	var sb strings.Builder
	words := func(k int, capitalize float64, punct float64) string {
		sb.Reset()
		for j := range k {
			if j > 0 {
				sb.WriteByte(' ')
			}
			w := vocab[zipfWord.Uint64()]
			if r.Float64() < capitalize {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			sb.WriteString(w)
			if r.Float64() < punct {
				sb.WriteString([]string{",", "!", " -", ":", "?"}[r.Intn(5)])
			}
		}
		return sb.String()
	}
	t0 := int64(1_700_000_000_000_000)
	for i := range n {
		eventID.Append(int64(i) + seed<<32)
		eventTime.Append(t0 + int64(i)*1000 + r.Int63n(1000))
		query.Append(words(1+r.Intn(5), 0.1, 0.02))
		title.Append(words(3+r.Intn(7), 0.5, 0.1))
		if r.Intn(50) == 0 {
			category.AppendNull()
		} else {
			category.Append(categories[zipfCat.Uint64()])
		}
		advertiser.Append(int64(zipfAdv.Uint64()) + 1000)
		country.Append(countries[r.Intn(len(countries))])
		device.Append(devices[r.Intn(len(devices))])
		if r.Intn(100) == 0 {
			price.AppendNull()
		} else {
			price.Append(math.Round(math.Exp(r.NormFloat64()*1.2-0.5)*1000) / 1000)
		}
		c := int64(0)
		if r.Intn(30) == 0 {
			c = 1
		}
		click.Append(c)
		conversion.Append(c * int64(r.Intn(2)))
	}
	return b.NewRecord()
}

// adsVocabulary returns n distinct words: mostly ASCII syllable words,
// about 5% with non-ASCII letters.
func adsVocabulary(r *rand.Rand, n int) []string {
	syll := []string{"ka", "lo", "mi", "ne", "ra", "shoe", "red", "blu", "tan", "po", "ver", "sa", "le", "di", "on",
		"ex", "ma", "ri", "to", "be", "st", "ing", "er", "al", "con", "pro", "ul", "tra", "mo", "de"}
	foreign := []string{"café", "größe", "niño", "ñandú", "İstanbul", "ısı", "Ελλάδα", "ΟΔΟΣ", "日本", "東京", "서울",
		"москва", "façade", "😀", "coração", "zürich", "ŞEKER", "crème", "über", "ΣΟΦΊΑ"}
	seen := map[string]bool{}
	out := make([]string, 0, n)
	for len(out) < n {
		var w string
		if r.Intn(20) == 0 {
			w = foreign[r.Intn(len(foreign))] + syll[r.Intn(len(syll))]
		} else {
			k := 1 + r.Intn(4)
			for range k {
				w += syll[r.Intn(len(syll))]
			}
		}
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

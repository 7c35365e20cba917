package devenv

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MetricsPath is where MinIO serves the counters of the requests it
// answered: metrics v3's api/requests group, per node. It is read, not
// the v2 endpoints (/minio/v2/metrics/cluster and node), because v2
// caches its answer for 10 s, measured on the pinned server: a scrape
// right after a phase would show the counters of before it. v3's group is
// computed at each scrape, and a scrape is not itself counted (its type
// is not s3).
const MetricsPath = "/minio/metrics/v3/api/requests"

// S3Traffic is what a MinIO server counted of the S3 requests it served
// since it started: requests by API, errors, and bytes both ways. A
// server's counters only grow, so the traffic of an interval is the Sub
// of two scrapes.
type S3Traffic struct {
	// Requests counts requests by S3 API as MinIO names them (GetObject,
	// HeadObject, PutObject, ListObjectsV2, DeleteObject,
	// DeleteMultipleObjects, GetBucketLocation, ...): each retry is a
	// request, and a ranged GET is a GetObject like a whole one (MinIO
	// does not tell them apart).
	Requests map[string]int64
	// Errors counts the requests answered 4xx or 5xx, by API (they are in
	// Requests too).
	Errors map[string]int64
	// SentBytes and ReceivedBytes are the bytes MinIO sent in answers
	// (object bodies of GETs, listings) and received in requests (object
	// bodies of PUTs), over every S3 API.
	SentBytes, ReceivedBytes int64
}

// Total is the number of requests of every API.
func (t S3Traffic) Total() int64 {
	var n int64
	for _, v := range t.Requests {
		n += v
	}
	return n
}

// Sub returns t - u: the traffic between scrape u and scrape t.
func (t S3Traffic) Sub(u S3Traffic) S3Traffic {
	sub := func(a, b map[string]int64) map[string]int64 {
		out := map[string]int64{}
		for k, v := range a {
			if d := v - b[k]; d != 0 {
				out[k] = d
			}
		}
		return out
	}
	return S3Traffic{Requests: sub(t.Requests, u.Requests), Errors: sub(t.Errors, u.Errors),
		SentBytes: t.SentBytes - u.SentBytes, ReceivedBytes: t.ReceivedBytes - u.ReceivedBytes}
}

// S3Traffic scrapes the server's request counters (ScrapeS3Traffic).
func (m *MinIO) S3Traffic(ctx context.Context) (S3Traffic, error) {
	return ScrapeS3Traffic(ctx, m.Endpoint, m.AccessKey, m.SecretKey)
}

// ScrapeS3Traffic reads the request counters of the MinIO server at
// endpoint (host:port, plain HTTP as devenv serves it) with its root
// credentials: any devenv server, sigd dev's included, whose keys are in
// its dev.json. The server keeps its metrics behind authentication (the
// servers here are started without MINIO_PROMETHEUS_AUTH_TYPE=public);
// the bearer token is the one `mc admin prometheus generate` makes, a JWT
// signed with the secret key (HS512; subject the access key, issuer
// "prometheus").
func ScrapeS3Traffic(ctx context.Context, endpoint, accessKey, secretKey string) (S3Traffic, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+MetricsPath, nil)
	if err != nil {
		return S3Traffic{}, err
	}
	req.Header.Set("Authorization", "Bearer "+prometheusToken(accessKey, secretKey, time.Now().Add(time.Hour)))
	resp, err := metricsClient.Do(req)
	if err != nil {
		return S3Traffic{}, fmt.Errorf("devenv: minio metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return S3Traffic{}, fmt.Errorf("devenv: minio metrics %s: %s: %s", MetricsPath, resp.Status, strings.TrimSpace(string(b)))
	}
	return ParseS3Traffic(resp.Body)
}

var metricsClient = &http.Client{Timeout: 10 * time.Second}

// prometheusToken is MinIO's Prometheus bearer token for the root
// credentials, valid until exp.
func prometheusToken(accessKey, secretKey string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	header, _ := json.Marshal(map[string]string{"alg": "HS512", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{"exp": exp.Unix(), "sub": accessKey, "iss": "prometheus"})
	signing := enc(header) + "." + enc(claims)
	mac := hmac.New(sha512.New, []byte(secretKey))
	mac.Write([]byte(signing))
	return signing + "." + enc(mac.Sum(nil))
}

// The metrics of MetricsPath that S3Traffic holds; samples of type other
// than s3 (MinIO's own admin and internode APIs) are left out.
const (
	metricRequests = "minio_api_requests_total"
	metricErrors   = "minio_api_requests_errors_total"
	metricSent     = "minio_api_requests_traffic_sent_bytes"
	metricReceived = "minio_api_requests_traffic_received_bytes"
)

// ParseS3Traffic reads S3Traffic from a scrape of MetricsPath (the
// Prometheus text format). MinIO leaves out a counter that is still 0 (a
// server that has served nothing answers an empty page), so a metric
// missing is 0.
func ParseS3Traffic(r io.Reader) (S3Traffic, error) {
	t := S3Traffic{Requests: map[string]int64{}, Errors: map[string]int64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, err := ParseSample(line)
		if err != nil {
			return S3Traffic{}, fmt.Errorf("devenv: minio metrics: %w", err)
		}
		if labels["type"] != "s3" {
			continue
		}
		// Counters are integers sent as floats ("1.2e+06" for large ones).
		n := int64(value)
		switch name {
		case metricRequests:
			t.Requests[labels["name"]] += n
		case metricErrors:
			t.Errors[labels["name"]] += n
		case metricSent:
			t.SentBytes += n
		case metricReceived:
			t.ReceivedBytes += n
		}
	}
	if err := sc.Err(); err != nil {
		return S3Traffic{}, fmt.Errorf("devenv: minio metrics: %w", err)
	}
	maps.DeleteFunc(t.Errors, func(_ string, v int64) bool { return v == 0 })
	return t, nil
}

// ParseSample parses one sample line of the Prometheus text format:
// name{label="value",...} value [timestamp].
func ParseSample(line string) (name string, labels map[string]string, value float64, err error) {
	labels = map[string]string{}
	rest := line
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return "", nil, 0, fmt.Errorf("sample %q: no value", line)
	} else {
		name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq < 0 {
				return "", nil, 0, fmt.Errorf("sample %q: malformed labels", line)
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var v strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				c := rest[i]
				if c == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(rest[i])
					}
					continue
				}
				if c == '"' {
					rest, closed = rest[i+1:], true
					break
				}
				v.WriteByte(c)
			}
			if !closed {
				return "", nil, 0, fmt.Errorf("sample %q: unterminated label value", line)
			}
			labels[key] = v.String()
		}
	}
	f := strings.Fields(rest)
	if len(f) < 1 || len(f) > 2 {
		return "", nil, 0, fmt.Errorf("sample %q: want a value and at most a timestamp", line)
	}
	value, err = strconv.ParseFloat(f[0], 64)
	if err != nil {
		return "", nil, 0, fmt.Errorf("sample %q: %w", line, err)
	}
	return name, labels, value, nil
}

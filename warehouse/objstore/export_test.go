package objstore

import "context"

// getRange and getSuffix read a range and a suffix into a new buffer, the
// way a caller without a buffer of its own does; the tests here and in
// objstore_test (as GetRange and GetSuffix) check what they return.
func getRange(ctx context.Context, s Reader, key string, off, length int64) ([]byte, error) {
	buf := make([]byte, length)
	if err := s.GetRangeInto(ctx, key, off, buf, nil); err != nil {
		return nil, err
	}
	return buf, nil
}

func getSuffix(ctx context.Context, s Reader, key string, n int64) ([]byte, Info, error) {
	buf := make([]byte, n)
	k, info, err := s.GetSuffixInto(ctx, key, buf)
	if err != nil {
		return nil, Info{}, err
	}
	return buf[:k], info, nil
}

var (
	GetRange  = getRange
	GetSuffix = getSuffix
)

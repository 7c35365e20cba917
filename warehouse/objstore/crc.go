package objstore

// ChecksumCombine returns the CRC-32C of a||b given crcA = Checksum(a),
// crcB = Checksum(b) and lenB = len(b), without reading either. Writers
// that checksum the pieces of an object as they lay them out (block.Encode
// checksums every column segment for its directory) get the whole object's
// checksum from those in O(log lenB) work instead of a second pass over the
// bytes.
//
// The method is zlib's crc32_combine: appending lenB zero bytes to a is a
// linear map on the CRC register, applied by repeated squaring of the
// one-zero-bit operator, and the CRC of b (whose register starts at zero for
// the combination) is then XORed in.
func ChecksumCombine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	var even, odd [32]uint32
	// odd: the operator for one zero bit, reflected Castagnoli polynomial.
	odd[0] = 0x82f63b78
	row := uint32(1)
	for i := 1; i < 32; i++ {
		odd[i] = row
		row <<= 1
	}
	gf2Square(even[:], odd[:]) // two zero bits
	gf2Square(odd[:], even[:]) // four zero bits
	// Apply lenB zero bytes: the first squaring gives one byte (eight bits).
	for {
		gf2Square(even[:], odd[:])
		if lenB&1 != 0 {
			crcA = gf2Times(even[:], crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
		gf2Square(odd[:], even[:])
		if lenB&1 != 0 {
			crcA = gf2Times(odd[:], crcA)
		}
		lenB >>= 1
		if lenB == 0 {
			break
		}
	}
	return crcA ^ crcB
}

func gf2Times(mat []uint32, vec uint32) uint32 {
	var sum uint32
	for i := 0; vec != 0; i, vec = i+1, vec>>1 {
		if vec&1 != 0 {
			sum ^= mat[i]
		}
	}
	return sum
}

func gf2Square(square, mat []uint32) {
	for n := range 32 {
		square[n] = gf2Times(mat, mat[n])
	}
}

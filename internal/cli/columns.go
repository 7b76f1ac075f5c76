package cli

import (
	"bufio"
	"strings"
	"unicode"
)

// columnGap is the run of spaces between two columns.
const columnGap = 2

// writeColumns writes rows as a table aligned by display width: the columns a terminal gives each
// cell, two for a wide East Asian character (CJK ideographs, kana, Hangul, fullwidth forms,
// most emoji) and none for a combining mark, where text/tabwriter counts one per rune and a cell
// of Chinese text would push every later column of its row out of line. The last column is not
// padded.
func writeColumns(w *bufio.Writer, rows [][]string) {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], displayWidth(c))
		}
	}
	for _, r := range rows {
		for i, c := range r {
			w.WriteString(c)
			if i < len(r)-1 {
				w.WriteString(strings.Repeat(" ", widths[i]-displayWidth(c)+columnGap))
			}
		}
		w.WriteByte('\n')
	}
}

// displayWidth is how many terminal columns s takes (see writeColumns). A cell holds no control
// characters: cell and argvCell quote them.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		case wide(r):
			n += 2
		default:
			n++
		}
	}
	return n
}

// wide reports whether r is East Asian Wide or Fullwidth (Unicode's EastAsianWidth W and F, in
// the ranges terminals render two columns wide, after Markus Kuhn's wcwidth).
func wide(r rune) bool {
	if r < 0x1100 {
		return false
	}
	for _, rg := range wideRanges {
		if r >= rg[0] && r <= rg[1] {
			return true
		}
	}
	return false
}

var wideRanges = [][2]rune{
	{0x1100, 0x115f},   // Hangul Jamo initial consonants
	{0x231a, 0x231b},   // watch, hourglass
	{0x2329, 0x232a},   // angle brackets
	{0x23e9, 0x23ec},   // emoji media controls
	{0x23f0, 0x23f0},   // alarm clock
	{0x23f3, 0x23f3},   // hourglass flowing
	{0x25fd, 0x25fe},   // medium small squares
	{0x2614, 0x2615},   // umbrella, hot beverage
	{0x2648, 0x2653},   // zodiac
	{0x267f, 0x267f},   // wheelchair
	{0x2693, 0x2693},   // anchor
	{0x26a1, 0x26a1},   // high voltage
	{0x26aa, 0x26ab},   // circles
	{0x26bd, 0x26be},   // balls
	{0x26c4, 0x26c5},   // snowman, sun behind cloud
	{0x26ce, 0x26ce},   // ophiuchus
	{0x26d4, 0x26d4},   // no entry
	{0x26ea, 0x26ea},   // church
	{0x26f2, 0x26f3},   // fountain, golf
	{0x26f5, 0x26f5},   // sailboat
	{0x26fa, 0x26fa},   // tent
	{0x26fd, 0x26fd},   // fuel pump
	{0x2705, 0x2705},   // check mark
	{0x270a, 0x270b},   // fists
	{0x2728, 0x2728},   // sparkles
	{0x274c, 0x274c},   // cross mark
	{0x274e, 0x274e},   // cross mark button
	{0x2753, 0x2755},   // question marks
	{0x2757, 0x2757},   // exclamation mark
	{0x2795, 0x2797},   // plus, minus, division
	{0x27b0, 0x27b0},   // curly loop
	{0x27bf, 0x27bf},   // double curly loop
	{0x2b1b, 0x2b1c},   // large squares
	{0x2b50, 0x2b50},   // star
	{0x2b55, 0x2b55},   // circle
	{0x2e80, 0x303e},   // CJK radicals, Kangxi, CJK symbols and punctuation
	{0x3041, 0x33ff},   // kana, Bopomofo, Hangul compatibility Jamo, CJK compatibility
	{0x3400, 0x4dbf},   // CJK extension A
	{0x4e00, 0x9fff},   // CJK unified ideographs
	{0xa000, 0xa4cf},   // Yi
	{0xa960, 0xa97f},   // Hangul Jamo extended A
	{0xac00, 0xd7a3},   // Hangul syllables
	{0xf900, 0xfaff},   // CJK compatibility ideographs
	{0xfe10, 0xfe19},   // vertical forms
	{0xfe30, 0xfe6f},   // CJK compatibility forms, small forms
	{0xff00, 0xff60},   // fullwidth forms
	{0xffe0, 0xffe6},   // fullwidth signs
	{0x16fe0, 0x16fe4}, // ideographic symbols
	{0x17000, 0x18cff}, // Tangut
	{0x1b000, 0x1b2ff}, // kana supplement, extended
	{0x1f004, 0x1f004}, // mahjong tile
	{0x1f0cf, 0x1f0cf}, // playing card
	{0x1f18e, 0x1f18e}, // AB button
	{0x1f191, 0x1f19a}, // squared words
	{0x1f200, 0x1f251}, // enclosed ideographic supplement
	{0x1f300, 0x1f64f}, // pictographs, emoticons
	{0x1f680, 0x1f6ff}, // transport and map symbols
	{0x1f7e0, 0x1f7eb}, // coloured circles and squares
	{0x1f90c, 0x1f9ff}, // supplemental symbols and pictographs
	{0x1fa70, 0x1faff}, // symbols and pictographs extended A
	{0x20000, 0x2fffd}, // CJK extensions B to F, compatibility supplement
	{0x30000, 0x3fffd}, // CJK extension G and beyond
}

package gtid

import (
	"encoding/json"
	"errors"
	"testing"
)

// Realistic server UUIDs, in ascending order.
const (
	u1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	u2 = "4d8b2e3a-0f1c-11ef-8b2a-0242ac120002"
	u3 = "f0e1d2c3-b4a5-11ee-9687-0242ac120003"
)

func TestParseMySQL(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"only whitespace", " \n\t ", ""},
		{"only commas", " , ,, ", ""},
		{"single gtid", u1 + ":7", u1 + ":7"},
		{"single interval", u1 + ":1-5", u1 + ":1-5"},
		{"degenerate interval", u1 + ":5-5", u1 + ":5"},
		{"several intervals", u1 + ":1-5:7:9-12", u1 + ":1-5:7:9-12"},
		{"upper-case uuid normalised", "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", u1 + ":1-5"},
		{"mysql newline after comma", u1 + ":1-5,\n" + u2 + ":1-3", u1 + ":1-5," + u2 + ":1-3"},
		{"whitespace around every token", "  " + u1 + " : 1 - 5 : 7 ,\r\n " + u2 + " :3  ", u1 + ":1-5:7," + u2 + ":3"},
		{"uuids sorted", u3 + ":1," + u1 + ":2," + u2 + ":3", u1 + ":2," + u2 + ":3," + u3 + ":1"},
		{"intervals sorted", u1 + ":9:1-3:5", u1 + ":1-3:5:9"},
		{"overlapping merged", u1 + ":1-5:3-8:2", u1 + ":1-8"},
		{"adjacent merged", u1 + ":1-5:6-8:9", u1 + ":1-9"},
		{"repeated uuid merged", u1 + ":1-5," + u2 + ":1," + u1 + ":6-7", u1 + ":1-7," + u2 + ":1"},
		{"empty elements skipped", "," + u1 + ":1,," + u2 + ":2,", u1 + ":1," + u2 + ":2"},
		{"max gno", u1 + ":9223372036854775806", u1 + ":9223372036854775806"},
		{"tagged", u1 + ":tag_1:1-5", u1 + ":tag_1:1-5"},
		{"tag lower-cased", u1 + ":Domain_1:1-3", u1 + ":domain_1:1-3"},
		{"tag starting with underscore", u1 + ":_x9:4", u1 + ":_x9:4"},
		{"tag of 32 characters", u1 + ":abcdefghijklmnopqrstuvwxyz_12345:1", u1 + ":abcdefghijklmnopqrstuvwxyz_12345:1"},
		{"mixed: tag applies until next tag", u1 + ":1-5:7:aa:1-3:9:bb:2", u1 + ":1-5:7:aa:1-3:9:bb:2"},
		{"tags sorted, untagged first", u1 + ":zz:1:aa:2", u1 + ":aa:2:zz:1"},
		{"untagged after tagged elsewhere", u1 + ":aa:1," + u1 + ":5", u1 + ":5:aa:1"},
		{"same tag in two places merged", u1 + ":aa:1-3:bb:1:AA:4-6", u1 + ":aa:1-6:bb:1"},
		{"mysql 9.7.4 gtid_executed after gtid_next='AUTOMATIC:Failover_A' (TestRealMySQL/TaggedGTIDs)",
			"1A29DFA0-E9AB-11F1-8AA7-02FC00000001:1-3:failover_a:1-2:failover_b:1",
			"1a29dfa0-e9ab-11f1-8aa7-02fc00000001:1-3:failover_a:1-2:failover_b:1"},
		{"mysql 9.1 gtid_executed sample",
			"3E11FA47-71CA-11E1-9E33-C80AA9429562:Domain_1:1-3:15-21, \n3E11FA47-71CA-11E1-9E33-C80AA9429562:Domain_2:8-52",
			u1 + ":domain_1:1-3:15-21:domain_2:8-52"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(MySQL, tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got := s.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if s.Flavor() != MySQL {
				t.Errorf("Flavor() = %v, want mysql", s.Flavor())
			}
			if s.IsEmpty() != (tt.want == "") {
				t.Errorf("IsEmpty() = %v for %q", s.IsEmpty(), tt.want)
			}
		})
	}
}

func TestParseMariaDB(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"only whitespace", "  \n", ""},
		{"current_pos one triple", "0-1-100", "0-1-100"},
		{"binlog state", "0-1-50,0-2-100", "0-1-50,0-2-100"},
		{"sorted by domain then server", "1-2-7,0-3-5,0-1-9", "0-1-9,0-3-5,1-2-7"},
		{"whitespace and newlines", " 0 - 1 - 50 ,\n 0-2-100 ", "0-1-50,0-2-100"},
		{"empty elements skipped", ",0-1-5,,", "0-1-5"},
		{"same key merged to the max", "0-1-5,0-1-9,0-1-3", "0-1-9"},
		{"seq 0 holds nothing", "0-1-0", ""},
		{"seq 0 beside others", "0-1-0,0-2-4", "0-2-4"},
		{"range extension", "0-1-5..20", "0-1-5..20"},
		{"range of one", "0-1-7..7", "0-1-7..7"},
		{"range from 1 prints plain", "0-1-1..20", "0-1-20"},
		{"several ranges of one key", "0-1-10..20,0-1-4", "0-1-4,0-1-10..20"},
		{"range adjacent to prefix merges", "0-1-4,0-1-5..9", "0-1-9"},
		{"range whitespace", "0-1-5 .. 9", "0-1-5..9"},
		{"max values", "4294967295-4294967295-18446744073709551615", "4294967295-4294967295-18446744073709551615"},
		{"range inside one ending at the top", "0-1-5..7,0-1-18446744073709551615", "0-1-18446744073709551615"},
		{"range after one ending at the top", "0-1-18446744073709551615,0-1-5..18446744073709551615", "0-1-18446744073709551615"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(MariaDB, tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got := s.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if s.Flavor() != MariaDB {
				t.Errorf("Flavor() = %v, want mariadb", s.Flavor())
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name   string
		f      Flavor
		in     string
		offset int
		msg    string
	}{
		{"short uuid", MySQL, "3e11fa47-71ca-11e1-9e33-c80aa942956:1", 0, `invalid UUID "3e11fa47-71ca-11e1-9e33-…"`},
		{"non-hex uuid", MySQL, "3e11fa47-71ca-11e1-9e33-c80aa942956g:1", 0, `invalid UUID "3e11fa47-71ca-11e1-9e33-…"`},
		{"uuid without dashes", MySQL, "3e11fa4771ca11e19e33c80aa9429562:1", 0, `invalid UUID "3e11fa4771ca11e19e33c80a…"`},
		{"garbage", MySQL, "hello", 0, `invalid UUID "hello"`},
		{"uuid without intervals", MySQL, u1, 0, "UUID " + u1 + " has no intervals"},
		{"uuid without intervals before comma", MySQL, u2 + ":1," + u1 + " ,", 39, "UUID " + u1 + " has no intervals"},
		{"trailing colon", MySQL, u1 + ":1:", 39, "expected interval or tag, found end of input"},
		{"zero gno", MySQL, u1 + ":0-5", 37, "transaction number 0 (must be ≥ 1)"},
		{"reversed interval", MySQL, u1 + ":5-3", 37, "interval 5-3 ends before it starts"},
		{"missing interval end", MySQL, u1 + ":5-", 39, "expected end of interval, found end of input"},
		{"gno too large", MySQL, u1 + ":9223372036854775807", 37, "transaction number 9223372036854775807 out of range (max 9223372036854775806)"},
		{"huge number clipped", MySQL, u1 + ":1-123456789012345678901234567890", 39, "end of interval 123456789012345678901234… out of range (max 9223372036854775806)"},
		{"negative", MySQL, u1 + ":-1", 37, `expected interval or tag, found "-1"`},
		{"dangling tag", MySQL, u1 + ":1-5:aa", 41, `tag "aa" has no intervals`},
		{"tag followed by tag", MySQL, u1 + ":aa:bb:1", 37, `tag "aa" has no intervals`},
		{"tag too long", MySQL, u1 + ":abcdefghijklmnopqrstuvwxyz_123456:1", 37, `tag "abcdefghijklmnopqrstuvwx…" longer than 32 characters`},
		{"bad tag character", MySQL, u1 + ":a-b:1", 38, `expected ':' or ',', found "-b:1"`},
		{"missing comma", MySQL, u1 + ":1 " + u2 + ":1", 39, `expected ':' or ',', found "4d8b2e3a-0f1c-11ef-8b2a-…"`},
		{"semicolon separator", MySQL, u1 + ":1;" + u2 + ":1", 38, `expected ':' or ',', found ";4d8b2e3a-0f1c-11ef-8b2a…"`},

		{"mariadb garbage", MariaDB, "x", 0, `expected domain id, found "x"`},
		{"mariadb pair", MariaDB, "0-1", 3, "expected '-' after server id, found end of input"},
		{"mariadb missing seq", MariaDB, "0-1-", 4, "expected sequence number, found end of input"},
		{"mariadb mysql text", MariaDB, u1 + ":1-5", 1, `expected '-' after domain id, found "e11fa47-71ca-11e1-9e33-c…"`},
		{"mariadb server id too large", MariaDB, "0-4294967296-1", 2, "server id 4294967296 out of range (max 4294967295)"},
		{"mariadb seq too large", MariaDB, "0-1-18446744073709551616", 4, "sequence number 18446744073709551616 out of range (max 18446744073709551615)"},
		{"mariadb reversed range", MariaDB, "0-1-9..3", 4, "range 9..3 ends before it starts"},
		{"mariadb range from 0", MariaDB, "0-1-0..3", 4, "range 0..3 starts at 0 (must be ≥ 1)"},
		{"mariadb bracket form rejected", MariaDB, "0-1-[5-20]", 4, `expected sequence number, found "[5-20]"`},
		{"mariadb missing comma", MariaDB, "0-1-5 0-2-6", 6, `expected ',', found "0-2-6"`},
		{"mariadb trailing junk", MariaDB, "0-1-5x", 5, `expected ',', found "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse(tt.f, tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want error", tt.in, s)
			}
			if !errors.Is(err, ErrParse) {
				t.Errorf("error %v does not wrap ErrParse", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			if pe.Offset != tt.offset || pe.Msg != tt.msg || pe.Flavor != tt.f {
				t.Errorf("got %s/offset %d: %s\nwant %s/offset %d: %s", pe.Flavor, pe.Offset, pe.Msg, tt.f, tt.offset, tt.msg)
			}
		})
	}
}

func TestParseErrorText(t *testing.T) {
	_, err := Parse(MySQL, u1+":5-3")
	want := "gtid: parse mysql set at offset 37: interval 5-3 ends before it starts"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	_, err = Parse(MariaDB, "0-1-")
	want = "gtid: parse mariadb set at offset 4: expected sequence number, found end of input"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestParseUnknownFlavor(t *testing.T) {
	for _, f := range []Flavor{0, 3} {
		if _, err := Parse(f, "0-1-2"); !errors.Is(err, ErrUnknownFlavor) {
			t.Errorf("Parse(flavor %d) error = %v, want ErrUnknownFlavor", f, err)
		}
	}
}

func TestMustParse(t *testing.T) {
	if got := MustParse(MariaDB, "0-1-2").String(); got != "0-1-2" {
		t.Errorf("MustParse = %q", got)
	}
	defer func() {
		if err, _ := recover().(error); !errors.Is(err, ErrParse) {
			t.Errorf("MustParse panic = %v, want ErrParse", err)
		}
	}()
	MustParse(MySQL, "nonsense")
}

func TestFlavor(t *testing.T) {
	tests := []struct {
		f    Flavor
		text string
	}{{MySQL, "mysql"}, {MariaDB, "mariadb"}, {0, "unknown"}, {7, "unknown"}}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.text {
			t.Errorf("Flavor(%d).String() = %q, want %q", tt.f, got, tt.text)
		}
	}
	for in, want := range map[string]Flavor{"mysql": MySQL, " MariaDB ": MariaDB, "MYSQL": MySQL} {
		if got, err := ParseFlavor(in); err != nil || got != want {
			t.Errorf("ParseFlavor(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseFlavor("percona"); !errors.Is(err, ErrUnknownFlavor) {
		t.Errorf("ParseFlavor(percona) error = %v, want ErrUnknownFlavor", err)
	}
	var cfg struct{ Engine Flavor }
	if err := json.Unmarshal([]byte(`{"Engine":"mariadb"}`), &cfg); err != nil || cfg.Engine != MariaDB {
		t.Errorf("json round trip: %v, %v", cfg.Engine, err)
	}
	if b, err := json.Marshal(cfg); err != nil || string(b) != `{"Engine":"mariadb"}` {
		t.Errorf("json.Marshal = %s, %v", b, err)
	}
	if _, err := Flavor(0).MarshalText(); !errors.Is(err, ErrUnknownFlavor) {
		t.Errorf("MarshalText(0) error = %v, want ErrUnknownFlavor", err)
	}
}

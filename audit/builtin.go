package audit

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// param is one argument of a built-in audit. def is the SQL used when the
// call does not give it; a required param has none.
type param struct {
	name     string
	required bool
	def      string
}

// builtin is one of SQLMesh's built-in audits: its arguments and the query
// it runs, built from the arguments' SQL for an engine dialect. The query
// reads @this_model and returns the offending rows.
type builtin struct {
	params []param
	query  func(a args, dialect string) (string, error)
}

// args are a call's arguments (defaults filled in), by name, as SQL text.
type args map[string]string

// req is a required parameter; opt one with a default.
func req(name string) param       { return param{name: name, required: true} }
func opt(name, def string) param  { return param{name: name, def: def} }
func col(a args) string           { return a["column"] }
func where(cond string) string    { return "SELECT *\nFROM @this_model\nWHERE " + cond }
func orAll(conds []string) string { return "(" + strings.Join(conds, ") OR (") + ")" }
func each(items []string, f func(string) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = f(it)
	}
	return out
}

// regexLike is a regular-expression match (a search, as REGEXP_LIKE) in the
// engine's dialect.
func regexLike(dialect, s, pattern string) string {
	switch dialect {
	case "postgres":
		return "(" + s + ") ~ " + pattern
	case "trino":
		return "regexp_like(" + s + ", " + pattern + ")"
	default:
		return "regexp_matches(" + s + ", " + pattern + ")"
	}
}

// rangeConds is SQLMesh's min_v/max_v/inclusive test of expr: the
// conditions under which a row is out of range.
func rangeConds(a args, expr string) string {
	conds := []string{"FALSE"}
	lo, hi := a["min_v"], a["max_v"]
	incl := !strings.EqualFold(strings.TrimSpace(a["inclusive"]), "false")
	if !isNull(lo) {
		if incl {
			conds = append(conds, expr+" < "+lo)
		} else {
			conds = append(conds, expr+" <= "+lo)
		}
	}
	if !isNull(hi) {
		if incl {
			conds = append(conds, expr+" > "+hi)
		} else {
			conds = append(conds, expr+" >= "+hi)
		}
	}
	return strings.Join(conds, " OR ")
}

func isNull(sql string) bool { return strings.EqualFold(strings.TrimSpace(sql), "null") }

// listArg is an argument written as a list, (a, b) or [a, b], or as one
// item; it is an error for it to be empty.
func listArg(a args, name string) ([]string, error) {
	items := splitList(a[name])
	if len(items) == 0 {
		return nil, fmt.Errorf("argument %s is an empty list", name)
	}
	return items, nil
}

// inList renders items as a parenthesised SQL list.
func inList(items []string) string { return "(" + strings.Join(items, ", ") + ")" }

var builtins = map[string]builtin{
	"not_null": {params: []param{req("columns")}, query: func(a args, _ string) (string, error) {
		cs, err := listArg(a, "columns")
		if err != nil {
			return "", err
		}
		return where(orAll(each(cs, func(c string) string { return c + " IS NULL" }))), nil
	}},
	"unique_values": {params: []param{req("columns")}, query: func(a args, _ string) (string, error) {
		cs, err := listArg(a, "columns")
		if err != nil {
			return "", err
		}
		var ranks, conds []string
		for i, c := range cs {
			r := fmt.Sprintf("gapless_rank_%d", i+1)
			ranks = append(ranks, fmt.Sprintf("row_number() OVER (PARTITION BY %s ORDER BY %s) AS %s", c, c, r))
			conds = append(conds, r+" > 1")
		}
		return "SELECT *\nFROM (\n  SELECT *, " + strings.Join(ranks, ", ") + "\n  FROM @this_model\n) AS gapless_ranked\nWHERE " +
			orAll(conds), nil
	}},
	"unique_combination_of_columns": {params: []param{req("columns")}, query: func(a args, _ string) (string, error) {
		cs, err := listArg(a, "columns")
		if err != nil {
			return "", err
		}
		l := strings.Join(cs, ", ")
		return "SELECT " + l + ", COUNT(*) AS gapless_count\nFROM @this_model\nGROUP BY " + l + "\nHAVING COUNT(*) > 1", nil
	}},
	"accepted_values": {params: []param{req("column"), req("is_in")}, query: func(a args, _ string) (string, error) {
		vs, err := listArg(a, "is_in")
		if err != nil {
			return "", err
		}
		return where(col(a) + " NOT IN " + inList(vs)), nil
	}},
	"not_accepted_values": {params: []param{req("column"), req("is_in")}, query: func(a args, _ string) (string, error) {
		vs, err := listArg(a, "is_in")
		if err != nil {
			return "", err
		}
		return where(col(a) + " IN " + inList(vs)), nil
	}},
	"accepted_range": {params: []param{req("column"), opt("min_v", "NULL"), opt("max_v", "NULL"), opt("inclusive", "TRUE")},
		query: func(a args, _ string) (string, error) { return where(rangeConds(a, col(a))), nil }},
	"number_of_rows": {params: []param{req("threshold")}, query: func(a args, _ string) (string, error) {
		t := strings.TrimSpace(a["threshold"])
		// Reading at most threshold+1 rows answers the question; LIMIT
		// takes only a literal on Trino, so an expression counts all.
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 || n == math.MaxInt64 {
			return "SELECT COUNT(*) AS gapless_rows\nFROM @this_model\nHAVING COUNT(*) <= " + t, nil
		}
		return "SELECT COUNT(*) AS gapless_rows\nFROM (SELECT 1 AS one FROM @this_model LIMIT " + strconv.FormatInt(n+1, 10) +
			") AS gapless_limited\nHAVING COUNT(*) <= " + t, nil
	}},
	"forall": {params: []param{req("criteria")}, query: func(a args, _ string) (string, error) {
		cs, err := listArg(a, "criteria")
		if err != nil {
			return "", err
		}
		return where(orAll(each(cs, func(c string) string { return "NOT (" + c + ")" }))), nil
	}},
	"at_least_one": {params: []param{req("column")}, query: func(a args, _ string) (string, error) {
		return "SELECT 1 AS gapless_empty\nFROM @this_model\nGROUP BY 1\nHAVING COUNT(" + col(a) + ") = 0", nil
	}},
	"not_constant": {params: []param{req("column")}, query: func(a args, _ string) (string, error) {
		return "SELECT t_cardinality\nFROM (SELECT COUNT(DISTINCT " + col(a) + ") AS t_cardinality FROM @this_model) AS r\nWHERE r.t_cardinality <= 1", nil
	}},
	"not_empty_string": {params: []param{req("column")}, query: func(a args, _ string) (string, error) {
		return where(col(a) + " = ''"), nil
	}},
	"not_null_proportion": {params: []param{req("column"), req("threshold")}, query: func(a args, _ string) (string, error) {
		c := col(a)
		return "SELECT *\nFROM (\n  SELECT COUNT(*) AS cnt_tot, COUNT(" + c + ") AS cnt_not_null, COUNT(*) - COUNT(" + c +
			") AS cnt_null\n  FROM @this_model\n) AS s\nWHERE s.cnt_not_null <= s.cnt_tot * " + a["threshold"], nil
	}},
	"sequential_values": {params: []param{req("column"), opt("interval", "1")}, query: func(a args, _ string) (string, error) {
		c := col(a)
		return "SELECT *\nFROM (\n  SELECT " + c + " AS gapless_value, LAG(" + c + ") OVER (ORDER BY " + c + ") AS prv\n  FROM @this_model\n) AS w\n" +
			"WHERE NOT (gapless_value = prv + " + a["interval"] + ")", nil
	}},
	"mutually_exclusive_ranges": {params: []param{req("lower_bound_column"), req("upper_bound_column"), opt("partition_clause", "")},
		query: func(a args, _ string) (string, error) {
			lo, hi, part := a["lower_bound_column"], a["upper_bound_column"], a["partition_clause"]
			if p := strings.TrimSpace(part); p != "" && !strings.HasPrefix(strings.ToUpper(p), "PARTITION BY") {
				part = "PARTITION BY " + p
			}
			return "WITH window_functions AS (\n  SELECT " + lo + " AS lower_bound, " + hi + " AS upper_bound,\n" +
				"    LEAD(" + lo + ") OVER (" + part + " ORDER BY " + lo + ", " + hi + ") AS next_lower_bound,\n" +
				"    row_number() OVER (" + part + " ORDER BY " + lo + " DESC, " + hi + " DESC) = 1 AS is_last_record\n" +
				"  FROM @this_model\n), calc AS (\n  SELECT *,\n" +
				"    COALESCE(lower_bound <= upper_bound, FALSE) AS lower_bound_lte_upper_bound,\n" +
				"    COALESCE(upper_bound <= next_lower_bound, is_last_record, FALSE) AS upper_bound_lte_next_lower_bound\n" +
				"  FROM window_functions\n)\nSELECT *\nFROM calc\nWHERE NOT (lower_bound_lte_upper_bound AND upper_bound_lte_next_lower_bound)", nil
		}},
	"valid_uuid": {params: []param{req("column")}, query: func(a args, d string) (string, error) {
		return where("NOT " + regexLike(d, "LOWER("+col(a)+")",
			"'^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'")), nil
	}},
	"valid_url": {params: []param{req("column")}, query: func(a args, d string) (string, error) {
		return where("NOT " + regexLike(d, col(a), `'^(https?|ftp)://[^\s/$.?#].[^\s]*$'`)), nil
	}},
	"valid_email": {params: []param{req("column")}, query: func(a args, d string) (string, error) {
		return where("NOT " + regexLike(d, col(a), `'^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9.-]+$'`)), nil
	}},
	"valid_http_method": {params: []param{req("column")}, query: func(a args, _ string) (string, error) {
		return where("NOT " + col(a) + " IN ('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'TRACE', 'CONNECT')"), nil
	}},
	"match_regex_pattern_list": {params: []param{req("column"), req("patterns")}, query: func(a args, d string) (string, error) {
		ps, err := listArg(a, "patterns")
		if err != nil {
			return "", err
		}
		return where(orAll(each(ps, func(p string) string { return "NOT " + regexLike(d, col(a), p) }))), nil
	}},
	"not_match_regex_pattern_list": {params: []param{req("column"), req("patterns")}, query: func(a args, d string) (string, error) {
		ps, err := listArg(a, "patterns")
		if err != nil {
			return "", err
		}
		return where(orAll(each(ps, func(p string) string { return regexLike(d, col(a), p) }))), nil
	}},
	"match_like_pattern_list": {params: []param{req("column"), req("patterns")}, query: func(a args, _ string) (string, error) {
		ps, err := listArg(a, "patterns")
		if err != nil {
			return "", err
		}
		return where(orAll(each(ps, func(p string) string { return "NOT " + col(a) + " LIKE " + p }))), nil
	}},
	"not_match_like_pattern_list": {params: []param{req("column"), req("patterns")}, query: func(a args, _ string) (string, error) {
		ps, err := listArg(a, "patterns")
		if err != nil {
			return "", err
		}
		return where(orAll(each(ps, func(p string) string { return col(a) + " LIKE " + p }))), nil
	}},
	"z_score": {params: []param{req("column"), req("threshold")}, query: func(a args, _ string) (string, error) {
		c := col(a)
		z := "(" + c + " - stats.gapless_mean) / NULLIF(stats.gapless_stddev, 0)"
		return "WITH stats AS (\n  SELECT AVG(" + c + ") AS gapless_mean, STDDEV(" + c + ") AS gapless_stddev\n  FROM @this_model\n)\n" +
			"SELECT " + c + ", " + z + " AS z_score\nFROM @this_model, stats\nWHERE ABS(" + z + ") > " + a["threshold"], nil
	}},
	"string_length_between": {params: []param{req("column"), opt("min_v", "NULL"), opt("max_v", "NULL"), opt("inclusive", "TRUE")},
		query: func(a args, _ string) (string, error) { return where(rangeConds(a, "LENGTH("+col(a)+")")), nil }},
	"string_length_equal": {params: []param{req("column"), req("v")}, query: func(a args, _ string) (string, error) {
		return where("LENGTH(" + col(a) + ") != " + a["v"]), nil
	}},
	"stddev_in_range": {params: []param{req("column"), opt("min_v", "NULL"), opt("max_v", "NULL"), opt("inclusive", "TRUE")},
		query: func(a args, _ string) (string, error) {
			return "SELECT *\nFROM (SELECT STDDEV(" + col(a) + ") AS gapless_stddev FROM @this_model) AS s\nWHERE " +
				rangeConds(a, "gapless_stddev"), nil
		}},
	"mean_in_range": {params: []param{req("column"), opt("min_v", "NULL"), opt("max_v", "NULL"), opt("inclusive", "TRUE")},
		query: func(a args, _ string) (string, error) {
			return "SELECT *\nFROM (SELECT AVG(" + col(a) + ") AS gapless_mean FROM @this_model) AS s\nWHERE " +
				rangeConds(a, "gapless_mean"), nil
		}},
	"chi_square": {params: []param{req("column_a"), req("column_b"), req("critical_value"), opt("dependent", "TRUE")},
		query: chiSquare},
	"kl_divergence": {params: []param{req("source_column"), req("target_column"), req("threshold")},
		query: klDivergence},
}

// double is the engine's double-precision type name.
func double(dialect string) string {
	if dialect == "postgres" {
		return "DOUBLE PRECISION"
	}
	return "DOUBLE"
}

// chiSquare is Pearson's chi-square test of independence of two categorical
// columns, over the rows where both are set. The statistic sums over every
// cell of the contingency table, those never observed included (their
// expected count is positive), which SQLMesh's query leaves out. With
// dependent (the default) the audit asserts the columns are dependent and
// fails when the statistic is at most critical_value; with dependent
// false it asserts independence and fails when the statistic exceeds it.
func chiSquare(a args, dialect string) (string, error) {
	ca, cb, crit := a["column_a"], a["column_b"], a["critical_value"]
	verdict := "s.chi_square <= " + crit
	if strings.EqualFold(strings.TrimSpace(a["dependent"]), "false") {
		verdict = "s.chi_square > " + crit
	}
	return "WITH gapless_samples AS (\n" +
		"  SELECT " + ca + " AS x_a, " + cb + " AS x_b\n  FROM @this_model\n  WHERE " + ca + " IS NOT NULL AND " + cb + " IS NOT NULL\n" +
		"), gapless_cells AS (\n  SELECT x_a, x_b, COUNT(*) AS observed FROM gapless_samples GROUP BY x_a, x_b\n" +
		"), gapless_a AS (\n  SELECT x_a, COUNT(*) AS tot_a FROM gapless_samples GROUP BY x_a\n" +
		"), gapless_b AS (\n  SELECT x_b, COUNT(*) AS tot_b FROM gapless_samples GROUP BY x_b\n" +
		"), gapless_expected AS (\n" +
		"  SELECT CAST(ta.tot_a AS " + double(dialect) + ") * tb.tot_b / (SELECT COUNT(*) FROM gapless_samples) AS expected,\n" +
		"    COALESCE(c.observed, 0) AS observed\n" +
		"  FROM gapless_a AS ta CROSS JOIN gapless_b AS tb\n" +
		"  LEFT JOIN gapless_cells AS c ON c.x_a = ta.x_a AND c.x_b = tb.x_b\n)\n" +
		"SELECT *\nFROM (\n" +
		"  SELECT ((SELECT COUNT(*) FROM gapless_a) - 1) * ((SELECT COUNT(*) FROM gapless_b) - 1) AS degrees_of_freedom,\n" +
		"    SUM((observed - expected) * (observed - expected) / expected) AS chi_square\n" +
		"  FROM gapless_expected\n) AS s\nWHERE " + verdict, nil
}

// klDivergence is the symmetric Kullback-Leibler divergence between the
// distribution of source_column's values and that of target_column's, in
// base-10 logarithms as SQLMesh's query computes it (so thresholds carry
// over). Values present in only one distribution add nothing (their terms
// are undefined), as in SQLMesh; NULLs are not values. The audit fails with
// one row when the divergence exceeds threshold.
func klDivergence(a args, dialect string) (string, error) {
	src, tgt, th := a["source_column"], a["target_column"], a["threshold"]
	dist := func(name, c, p string) string {
		return name + " AS (\n  SELECT v, CAST(n AS " + double(dialect) + ") / SUM(n) OVER () AS " + p + "\n" +
			"  FROM (SELECT " + c + " AS v, COUNT(*) AS n FROM @this_model WHERE " + c + " IS NOT NULL GROUP BY " + c + ") AS counted\n)"
	}
	return "WITH " + dist("gapless_p", src, "p") + ", " + dist("gapless_q", tgt, "q") + "\n" +
		"SELECT *\nFROM (\n" +
		"  SELECT SUM(p * log10(p / q) + q * log10(q / p)) AS kl_divergence\n" +
		"  FROM gapless_p JOIN gapless_q ON gapless_p.v = gapless_q.v\n" +
		") AS s\nWHERE s.kl_divergence > " + th, nil
}

// SQLMesh's documentation calls two built-ins by other names; both work.
func init() {
	builtins["string_length_equal_audit"] = builtins["string_length_equal"]
	builtins["string_length_between_audit"] = builtins["string_length_between"]
}

// BuiltinNames returns the names of the built-in audits, sorted.
func BuiltinNames() []string {
	out := make([]string, 0, len(builtins))
	for n := range builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// splitList splits a list argument, "(a, b)", "[a, b]" or "a", into its
// items at top-level commas (outside parentheses, brackets and quotes).
func splitList(sql string) []string {
	s := strings.TrimSpace(sql)
	if len(s) >= 2 && ((s[0] == '(' && s[len(s)-1] == ')') || (s[0] == '[' && s[len(s)-1] == ']')) && closesAtEnd(s) {
		s = s[1 : len(s)-1]
	}
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"':
			j := i + 1
			for j < len(s) {
				if s[j] == c {
					if j+1 < len(s) && s[j+1] == c {
						j += 2
						continue
					}
					break
				}
				j++
			}
			i = j
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if last := strings.TrimSpace(s[start:]); last != "" {
		out = append(out, last)
	}
	return out
}

// closesAtEnd reports whether the bracket opening s closes at its last
// byte, so "(a) + (b)" is not taken for a list.
func closesAtEnd(s string) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'', '"':
			q := s[i]
			i++
			for i < len(s) && s[i] != q {
				i++
			}
		case '(', '[':
			depth++
		case ')', ']':
			depth--
			if depth == 0 && i != len(s)-1 {
				return false
			}
		}
	}
	return true
}

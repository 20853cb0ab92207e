package mcptool

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// value is a literal or a reference in a contract: to the write's
// arguments (binding "") or to an Each binding, then fields.
type value struct {
	ref     bool
	binding string
	fields  []string
	lit     any
}

// parseValue reads a reference ("$.a.b", "$e.name", "$e") or, failing
// that, the JSON literal s (a bare word is a string).
func parseValue(s string, asString bool) (value, error) {
	if strings.HasPrefix(s, "$$") {
		return value{lit: s[1:]}, nil
	}
	if strings.HasPrefix(s, "$") {
		rest := s[1:]
		head, tail, _ := strings.Cut(rest, ".")
		v := value{ref: true, binding: head}
		if tail != "" {
			v.fields = strings.Split(tail, ".")
		}
		for _, f := range v.fields {
			if f == "" {
				return value{}, fmt.Errorf("reference %q has an empty field", s)
			}
		}
		return v, nil
	}
	if asString {
		return value{lit: s}, nil
	}
	var lit any
	if err := json.Unmarshal([]byte(s), &lit); err != nil {
		return value{lit: s}, nil
	}
	return value{lit: lit}, nil
}

// resolve gives the value in env (binding "" is the write's arguments).
func (v value) resolve(env map[string]any) (any, error) {
	if !v.ref {
		return v.lit, nil
	}
	cur, ok := env[v.binding]
	if !ok {
		return nil, fmt.Errorf("no binding %q", v.binding)
	}
	for _, f := range v.fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("$%s.%s: %q is not there", v.binding, strings.Join(v.fields, "."), f)
		}
		if cur, ok = m[f]; !ok {
			return nil, fmt.Errorf("$%s.%s: the call has no %q", v.binding, strings.Join(v.fields, "."), f)
		}
	}
	return cur, nil
}

// tstep is a path step before references are resolved.
type tstep struct {
	field string
	index *int
	elem  *value
	where map[string]value
}

// parsePath reads an effect path: fields separated by ".", each
// optionally followed by [N], [=value] or [field=value,...]; a leading
// "$" or "$." is the answer's root.
func parsePath(p string) ([]tstep, error) {
	p = strings.TrimPrefix(strings.TrimPrefix(p, "$"), ".")
	var out []tstep
	for p != "" {
		i := strings.IndexAny(p, ".[")
		if i < 0 {
			i = len(p)
		}
		if name := p[:i]; name != "" {
			out = append(out, tstep{field: name})
		}
		p = p[i:]
		for strings.HasPrefix(p, "[") {
			end := strings.Index(p, "]")
			if end < 0 {
				return nil, errors.New("a \"[\" is not closed")
			}
			s, err := parseBracket(p[1:end])
			if err != nil {
				return nil, err
			}
			out = append(out, s)
			p = p[end+1:]
		}
		if p != "" && !strings.HasPrefix(p, ".") {
			return nil, fmt.Errorf("unexpected %q", p)
		}
		p = strings.TrimPrefix(p, ".")
	}
	return out, nil
}

func parseBracket(in string) (tstep, error) {
	if n, err := strconv.Atoi(in); err == nil {
		return tstep{index: &n}, nil
	}
	if rest, ok := strings.CutPrefix(in, "="); ok {
		v, err := parseValue(rest, false)
		return tstep{elem: &v}, err
	}
	w := map[string]value{}
	for _, part := range strings.Split(in, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return tstep{}, fmt.Errorf("[%s]: want [N], [=value] or [field=value,...]", in)
		}
		pv, err := parseValue(v, false)
		if err != nil {
			return tstep{}, err
		}
		w[k] = pv
	}
	return tstep{where: w}, nil
}

// compiled is a checked contract.
type compiled struct {
	Contract
	each []value
	path []tstep
}

// compile checks c: the refs name the write's arguments or earlier
// bindings, the path parses, exactly one kind of Occurred.
func compile(c Contract) (*compiled, error) {
	cc := &compiled{Contract: c}
	switch {
	case c.Write == "":
		return nil, errors.New("write: is required")
	case c.Read.Tool == "":
		return nil, errors.New("read.tool: is required")
	}
	kinds := 0
	for _, b := range []bool{c.Occurred.Exists, c.Occurred.Equals != nil, c.Occurred.Changed} {
		if b {
			kinds++
		}
	}
	if kinds != 1 {
		return nil, errors.New("occurred: set exactly one of exists, equals, changed")
	}
	bound := map[string]bool{"": true}
	for i, e := range c.Each {
		v, err := parseValue(e.In, true)
		if err != nil || !v.ref || !bound[v.binding] {
			return nil, fmt.Errorf("each[%d].in: %q must reference the write's arguments ($.field) or an earlier binding", i, e.In)
		}
		if e.As == "" || bound[e.As] {
			return nil, fmt.Errorf("each[%d].as: %q must be a new, non-empty name", i, e.As)
		}
		bound[e.As] = true
		cc.each = append(cc.each, v)
	}
	check := func(field string, v value) error {
		if v.ref && !bound[v.binding] {
			return fmt.Errorf("%s: $%s is not bound (each binds names; $. is the write's arguments)", field, v.binding)
		}
		return nil
	}
	path, err := parsePath(c.Effect)
	if err != nil {
		return nil, fmt.Errorf("effect: %q: %v", c.Effect, err)
	}
	for _, s := range path {
		if s.elem != nil {
			if err := check("effect", *s.elem); err != nil {
				return nil, err
			}
		}
		for _, v := range s.where {
			if err := check("effect", v); err != nil {
				return nil, err
			}
		}
	}
	cc.path = path
	for k, a := range c.Read.Args {
		if err := eachRef(a, func(v value) error { return check("read.args."+k, v) }); err != nil {
			return nil, err
		}
	}
	if err := eachRef(c.Occurred.Equals, func(v value) error { return check("occurred.equals", v) }); err != nil {
		return nil, err
	}
	return cc, nil
}

// argRefs lists the write's top-level arguments the contract references.
func (cc *compiled) argRefs() []string {
	var out []string
	add := func(v value) {
		if v.ref && v.binding == "" && len(v.fields) > 0 {
			out = append(out, v.fields[0])
		}
	}
	for _, v := range cc.each {
		add(v)
	}
	for _, a := range cc.Read.Args {
		_ = eachRef(a, func(v value) error { add(v); return nil })
	}
	for _, s := range cc.path {
		if s.elem != nil {
			add(*s.elem)
		}
		for _, v := range s.where {
			add(v)
		}
	}
	_ = eachRef(cc.Occurred.Equals, func(v value) error { add(v); return nil })
	for k := range cc.When {
		out = append(out, k)
	}
	return out
}

// applies says whether the call's args hold the contract's When values.
func (cc *compiled) applies(args map[string]any) bool {
	for k, want := range cc.When {
		w, _ := json.Marshal(want)
		if !jsonEqual(args[k], w) {
			return false
		}
	}
	return true
}

// facts lists the facts a call with args would establish; a Changed
// contract's facts carry no value yet (the prior read gives it).
func (cc *compiled) facts(args map[string]any) ([]Fact, error) {
	envs := []map[string]any{{"": args}}
	for i, e := range cc.each {
		var next []map[string]any
		for _, env := range envs {
			arr, err := e.resolve(env)
			if err != nil {
				return nil, fmt.Errorf("each[%d]: %w", i, err)
			}
			list, ok := arr.([]any)
			if !ok {
				return nil, fmt.Errorf("each[%d]: %s is not an array", i, cc.Each[i].In)
			}
			for _, x := range list {
				n := map[string]any{cc.Each[i].As: x}
				for k, v := range env {
					n[k] = v
				}
				next = append(next, n)
			}
		}
		envs = next
	}
	out := make([]Fact, 0, len(envs))
	for _, env := range envs {
		f, err := cc.fact(env)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// fact resolves the contract in one binding environment.
func (cc *compiled) fact(env map[string]any) (Fact, error) {
	args := map[string]any{}
	for k, a := range cc.Read.Args {
		r, err := resolveTemplate(a, env)
		if err != nil {
			return Fact{}, fmt.Errorf("read.args.%s: %w", k, err)
		}
		args[k] = r
	}
	ab, err := json.Marshal(args)
	if err != nil {
		return Fact{}, fmt.Errorf("read.args: %w", err)
	}
	f := Fact{Read: cc.Read.Tool, Args: ab}
	for _, s := range cc.path {
		st := Step{Field: s.field, Index: s.index}
		if s.elem != nil {
			r, err := s.elem.resolve(env)
			if err != nil {
				return Fact{}, fmt.Errorf("effect: %w", err)
			}
			st.Elem, _ = json.Marshal(r)
		}
		if s.where != nil {
			st.Where = map[string]any{}
			for k, v := range s.where {
				r, err := v.resolve(env)
				if err != nil {
					return Fact{}, fmt.Errorf("effect: %w", err)
				}
				st.Where[k] = r
			}
		}
		f.Path = append(f.Path, st)
	}
	switch {
	case cc.Occurred.Exists:
		f.Op = opExists
	case cc.Occurred.Changed:
		f.Op = opNe
	default:
		r, err := resolveTemplate(cc.Occurred.Equals, env)
		if err != nil {
			return Fact{}, fmt.Errorf("occurred.equals: %w", err)
		}
		f.Op = opEq
		f.Value, _ = json.Marshal(r)
	}
	return f, nil
}

// eachRef calls fn with every reference in a template (strings starting
// with "$" within objects and arrays).
func eachRef(t any, fn func(value) error) error {
	switch x := t.(type) {
	case string:
		if v, _ := parseValue(x, true); v.ref {
			return fn(v)
		}
	case map[string]any:
		for _, e := range x {
			if err := eachRef(e, fn); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := eachRef(e, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolveTemplate replaces the references in a template by their values.
func resolveTemplate(t any, env map[string]any) (any, error) {
	switch x := t.(type) {
	case string:
		v, _ := parseValue(x, true)
		return v.resolve(env)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := resolveTemplate(e, env)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := resolveTemplate(e, env)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return t, nil
}

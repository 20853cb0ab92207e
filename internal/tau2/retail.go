// Package tau2 is the retail domain of tau2-bench (Sierra Research, MIT)
// as an MCP server over its db.json: the domain's read and write tools,
// behaving as the benchmark documents them (its tools and policy), in our
// own code. The data is not part of the tree: docs/evals.md#tau2-retail
// says where to get it.
package tau2

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// DB is the retail database: users, orders and products by id, kept as
// decoded JSON so that every field of the data survives a write.
type DB struct {
	Products map[string]map[string]any `json:"products"`
	Users    map[string]map[string]any `json:"users"`
	Orders   map[string]map[string]any `json:"orders"`
}

// Load reads a db.json.
func Load(path string) (*DB, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tau2 db: %w", err)
	}
	var db DB
	if err := json.Unmarshal(b, &db); err != nil {
		return nil, fmt.Errorf("tau2 db %s: %w", path, err)
	}
	return &db, nil
}

// Clone is a deep copy of db.
func (db *DB) Clone() *DB {
	b, _ := json.Marshal(db)
	var c DB
	_ = json.Unmarshal(b, &c)
	return &c
}

// Equal says whether two databases hold the same data.
func (db *DB) Equal(o *DB) bool {
	a, _ := json.Marshal(db)
	b, _ := json.Marshal(o)
	return string(a) == string(b)
}

// Writes are the domain's write tools.
var Writes = []string{"cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address",
	"modify_pending_order_items", "modify_pending_order_payment", "modify_user_address", "return_delivered_order_items"}

// IsWrite says whether tool is one of Writes.
func IsWrite(tool string) bool {
	for _, w := range Writes {
		if w == tool {
			return true
		}
	}
	return false
}

// Call runs tool with args on db (changing it for a write) and returns
// the tool's answer; an error is the domain's refusal, and then db is
// unchanged.
func (db *DB) Call(tool string, args map[string]any) (any, error) {
	a := argReader{args: args}
	var out any
	var err error
	switch tool {
	case "calculate":
		out, err = calculate(a.str("expression"))
	case "find_user_id_by_email":
		out, err = db.findUser(func(u map[string]any) bool { return strings.EqualFold(str(u["email"]), a.str("email")) })
	case "find_user_id_by_name_zip":
		out, err = db.findUser(func(u map[string]any) bool {
			n, _ := u["name"].(map[string]any)
			ad, _ := u["address"].(map[string]any)
			return strings.EqualFold(str(n["first_name"]), a.str("first_name")) && strings.EqualFold(str(n["last_name"]), a.str("last_name")) && str(ad["zip"]) == a.str("zip")
		})
	case "get_order_details":
		out, err = db.order(a.str("order_id"))
	case "get_user_details":
		out, err = db.user(a.str("user_id"))
	case "get_product_details":
		out, err = db.product(a.str("product_id"))
	case "get_item_details":
		out, err = db.item(a.str("item_id"))
	case "list_all_product_types":
		m := map[string]string{}
		for id, p := range db.Products {
			m[str(p["name"])] = id
		}
		b, _ := json.Marshal(m) // map keys are sorted
		out = string(b)
	case "transfer_to_human_agents":
		out = "Transfer successful"
	default:
		if !IsWrite(tool) {
			return nil, fmt.Errorf("unknown tool %s", tool)
		}
		return db.write(tool, a)
	}
	if err == nil && a.err != nil {
		err = a.err
	}
	return out, err
}

// write runs a write tool on a copy and keeps it only when it succeeds.
func (db *DB) write(tool string, a argReader) (any, error) {
	c := db.Clone()
	var out any
	var err error
	switch tool {
	case "cancel_pending_order":
		out, err = c.cancel(a.str("order_id"), a.str("reason"))
	case "exchange_delivered_order_items":
		out, err = c.exchange(a.str("order_id"), a.strs("item_ids"), a.strs("new_item_ids"), a.str("payment_method_id"))
	case "modify_pending_order_address":
		out, err = c.modifyOrderAddress(a.str("order_id"), a.address())
	case "modify_pending_order_items":
		out, err = c.modifyItems(a.str("order_id"), a.strs("item_ids"), a.strs("new_item_ids"), a.str("payment_method_id"))
	case "modify_pending_order_payment":
		out, err = c.modifyPayment(a.str("order_id"), a.str("payment_method_id"))
	case "modify_user_address":
		out, err = c.modifyUserAddress(a.str("user_id"), a.address())
	case "return_delivered_order_items":
		out, err = c.returnItems(a.str("order_id"), a.strs("item_ids"), a.str("payment_method_id"))
	}
	if err == nil {
		err = a.err
	}
	if err != nil {
		return nil, err
	}
	*db = *c
	return out, nil
}

// argReader reads typed arguments, keeping the first type error.
type argReader struct {
	args map[string]any
	err  error
}

func (a *argReader) str(k string) string {
	v, ok := a.args[k]
	s, isStr := v.(string)
	if (!ok || !isStr) && a.err == nil {
		a.err = fmt.Errorf("argument %s: want a string", k)
	}
	return s
}

func (a *argReader) strs(k string) []string {
	raw, ok := a.args[k].([]any)
	if !ok && a.err == nil {
		a.err = fmt.Errorf("argument %s: want a list of strings", k)
	}
	out := make([]string, 0, len(raw))
	for _, x := range raw {
		s, ok := x.(string)
		if !ok && a.err == nil {
			a.err = fmt.Errorf("argument %s: want a list of strings", k)
		}
		out = append(out, s)
	}
	return out
}

func (a *argReader) address() map[string]any {
	out := map[string]any{}
	for _, k := range []string{"address1", "address2", "city", "state", "country", "zip"} {
		out[k] = a.str(k)
	}
	return out
}

func str(v any) string { s, _ := v.(string); return s }

func num(v any) float64 { f, _ := v.(float64); return f }

func round2(f float64) float64 { return math.Round(f*100) / 100 }

func (db *DB) findUser(match func(map[string]any) bool) (string, error) {
	ids := make([]string, 0, len(db.Users))
	for id := range db.Users {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if match(db.Users[id]) {
			return id, nil
		}
	}
	return "", fmt.Errorf("user not found")
}

func (db *DB) order(id string) (map[string]any, error) {
	if o, ok := db.Orders[id]; ok {
		return o, nil
	}
	return nil, fmt.Errorf("order not found")
}

func (db *DB) user(id string) (map[string]any, error) {
	if u, ok := db.Users[id]; ok {
		return u, nil
	}
	return nil, fmt.Errorf("user not found")
}

func (db *DB) product(id string) (map[string]any, error) {
	if p, ok := db.Products[id]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("product not found")
}

func (db *DB) item(id string) (map[string]any, error) {
	for _, p := range db.Products {
		if v, ok := p["variants"].(map[string]any)[id].(map[string]any); ok {
			return v, nil
		}
	}
	return nil, fmt.Errorf("item not found")
}

func (db *DB) variant(productID, itemID string) (map[string]any, error) {
	p, err := db.product(productID)
	if err != nil {
		return nil, err
	}
	if v, ok := p["variants"].(map[string]any)[itemID].(map[string]any); ok {
		return v, nil
	}
	return nil, fmt.Errorf("variant not found")
}

func (db *DB) paymentMethod(userID, id string) (map[string]any, error) {
	u, err := db.user(userID)
	if err != nil {
		return nil, err
	}
	if pm, ok := u["payment_methods"].(map[string]any)[id].(map[string]any); ok {
		return pm, nil
	}
	return nil, fmt.Errorf("payment method not found")
}

func isGiftCard(pm map[string]any) bool { return str(pm["source"]) == "gift_card" }

// calculate evaluates + - * / and parentheses over numbers, rounded to
// two decimals.
func calculate(expr string) (string, error) {
	for _, r := range expr {
		if !strings.ContainsRune("0123456789+-*/(). ", r) {
			return "", fmt.Errorf("invalid characters in expression")
		}
	}
	p := &calc{s: strings.ReplaceAll(expr, " ", "")}
	v, err := p.sum()
	if err == nil && p.i != len(p.s) {
		err = fmt.Errorf("invalid expression")
	}
	if err != nil {
		return "", err
	}
	return strconv.FormatFloat(round2(v), 'f', -1, 64), nil
}

type calc struct {
	s string
	i int
}

func (c *calc) sum() (float64, error) {
	v, err := c.product()
	for err == nil && c.i < len(c.s) && (c.s[c.i] == '+' || c.s[c.i] == '-') {
		op := c.s[c.i]
		c.i++
		var w float64
		if w, err = c.product(); op == '+' {
			v += w
		} else {
			v -= w
		}
	}
	return v, err
}

func (c *calc) product() (float64, error) {
	v, err := c.unary()
	for err == nil && c.i < len(c.s) && (c.s[c.i] == '*' || c.s[c.i] == '/') {
		op := c.s[c.i]
		c.i++
		var w float64
		if w, err = c.unary(); err == nil && op == '*' {
			v *= w
		} else if err == nil {
			if w == 0 {
				return 0, fmt.Errorf("division by zero")
			}
			v /= w
		}
	}
	return v, err
}

func (c *calc) unary() (float64, error) {
	if c.i < len(c.s) && (c.s[c.i] == '-' || c.s[c.i] == '+') {
		neg := c.s[c.i] == '-'
		c.i++
		v, err := c.unary()
		if neg {
			v = -v
		}
		return v, err
	}
	if c.i < len(c.s) && c.s[c.i] == '(' {
		c.i++
		v, err := c.sum()
		if err != nil || c.i >= len(c.s) || c.s[c.i] != ')' {
			return 0, fmt.Errorf("invalid expression")
		}
		c.i++
		return v, nil
	}
	j := c.i
	for j < len(c.s) && (c.s[j] >= '0' && c.s[j] <= '9' || c.s[j] == '.') {
		j++
	}
	v, err := strconv.ParseFloat(c.s[c.i:j], 64)
	if err != nil {
		return 0, fmt.Errorf("invalid expression")
	}
	c.i = j
	return v, nil
}

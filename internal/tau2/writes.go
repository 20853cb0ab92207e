package tau2

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// payments is an order's payment history.
func payments(o map[string]any) []any { h, _ := o["payment_history"].([]any); return h }

func payment(kind string, amount float64, method string) map[string]any {
	return map[string]any{"transaction_type": kind, "amount": amount, "payment_method_id": method}
}

// items is an order's items.
func items(o map[string]any) []map[string]any {
	raw, _ := o["items"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, x := range raw {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// haveItems checks that the order holds every id of ids as many times as
// ids names it.
func haveItems(o map[string]any, ids []string) error {
	have := map[string]int{}
	for _, it := range items(o) {
		have[str(it["item_id"])]++
	}
	want := map[string]int{}
	for _, id := range ids {
		want[id]++
		if want[id] > have[id] {
			return fmt.Errorf("item %s not found in the order", id)
		}
	}
	return nil
}

func sortedAny(ids []string) []any {
	s := append([]string(nil), ids...)
	sort.Strings(s)
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// cancel cancels a pending order, refunding every payment (to a gift card
// at once).
func (db *DB) cancel(orderID, reason string) (any, error) {
	o, err := db.order(orderID)
	if err != nil {
		return nil, err
	}
	if str(o["status"]) != "pending" {
		return nil, errors.New("non-pending order cannot be cancelled")
	}
	if reason != "no longer needed" && reason != "ordered by mistake" {
		return nil, errors.New("invalid reason")
	}
	var refunds []any
	for _, p := range payments(o) {
		pm, _ := p.(map[string]any)
		method := str(pm["payment_method_id"])
		refunds = append(refunds, payment("refund", num(pm["amount"]), method))
		m, err := db.paymentMethod(str(o["user_id"]), method)
		if err != nil {
			return nil, err
		}
		if isGiftCard(m) {
			m["balance"] = round2(num(m["balance"]) + num(pm["amount"]))
		}
	}
	o["status"] = "cancelled"
	o["cancel_reason"] = reason
	o["payment_history"] = append(payments(o), refunds...)
	return o, nil
}

// priceDiff is what swapping itemIDs for newIDs in o costs, checking each
// new item is an available variant of the old one's product.
func (db *DB) priceDiff(o map[string]any, itemIDs, newIDs []string, mustDiffer bool) (float64, []map[string]any, error) {
	if err := haveItems(o, itemIDs); err != nil {
		return 0, nil, err
	}
	if len(itemIDs) != len(newIDs) {
		return 0, nil, errors.New("the number of items to be exchanged should match")
	}
	diff := 0.0
	var variants []map[string]any
	for i, id := range itemIDs {
		if mustDiffer && id == newIDs[i] {
			return 0, nil, errors.New("the new item id should be different from the old item id")
		}
		var it map[string]any
		for _, x := range items(o) {
			if str(x["item_id"]) == id {
				it = x
				break
			}
		}
		v, err := db.variant(str(it["product_id"]), newIDs[i])
		if err != nil {
			return 0, nil, err
		}
		if avail, _ := v["available"].(bool); !avail {
			return 0, nil, fmt.Errorf("new item %s not found or available", newIDs[i])
		}
		diff += num(v["price"]) - num(it["price"])
		variants = append(variants, v)
	}
	return round2(diff), variants, nil
}

// swap checks a swap of order's itemIDs for newIDs paid with method, the
// order in status: the order, the payment method, the price difference and
// the new variants.
func (db *DB) swap(orderID, status string, itemIDs, newIDs []string, method string, mustDiffer bool) (o, pm map[string]any, diff float64, variants []map[string]any, err error) {
	if o, err = db.order(orderID); err != nil {
		return nil, nil, 0, nil, err
	}
	if str(o["status"]) != status {
		return nil, nil, 0, nil, fmt.Errorf("non-%s order cannot be changed so", status)
	}
	if diff, variants, err = db.priceDiff(o, itemIDs, newIDs, mustDiffer); err != nil {
		return nil, nil, 0, nil, err
	}
	if pm, err = db.paymentMethod(str(o["user_id"]), method); err != nil {
		return nil, nil, 0, nil, err
	}
	if isGiftCard(pm) && num(pm["balance"]) < diff {
		return nil, nil, 0, nil, errors.New("insufficient gift card balance to pay for the price difference")
	}
	return o, pm, diff, variants, nil
}

// exchange requests an exchange of a delivered order's items.
func (db *DB) exchange(orderID string, itemIDs, newIDs []string, method string) (any, error) {
	o, _, diff, _, err := db.swap(orderID, "delivered", itemIDs, newIDs, method, false)
	if err != nil {
		return nil, err
	}
	o["status"] = "exchange requested"
	o["exchange_items"] = sortedAny(itemIDs)
	o["exchange_new_items"] = sortedAny(newIDs)
	o["exchange_payment_method_id"] = method
	o["exchange_price_difference"] = diff
	return o, nil
}

// modifyOrderAddress changes a pending order's shipping address.
func (db *DB) modifyOrderAddress(orderID string, addr map[string]any) (any, error) {
	o, err := db.order(orderID)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(str(o["status"]), "pending") {
		return nil, errors.New("non-pending order cannot be modified")
	}
	o["address"] = addr
	return o, nil
}

// modifyItems swaps a pending order's items for other variants, paying or
// refunding the difference.
func (db *DB) modifyItems(orderID string, itemIDs, newIDs []string, method string) (any, error) {
	o, pm, diff, variants, err := db.swap(orderID, "pending", itemIDs, newIDs, method, true)
	if err != nil {
		return nil, err
	}
	kind := "refund"
	if diff > 0 {
		kind = "payment"
	}
	amount := diff
	if amount < 0 {
		amount = -amount
	}
	o["payment_history"] = append(payments(o), payment(kind, amount, method))
	if isGiftCard(pm) {
		pm["balance"] = round2(num(pm["balance"]) - diff)
	}
	for i, id := range itemIDs {
		for _, it := range items(o) {
			if str(it["item_id"]) == id {
				it["item_id"], it["price"], it["options"] = newIDs[i], variants[i]["price"], variants[i]["options"]
				break
			}
		}
	}
	o["status"] = "pending (item modified)"
	return o, nil
}

// modifyPayment moves a pending order's single payment to another method.
func (db *DB) modifyPayment(orderID, method string) (any, error) {
	o, err := db.order(orderID)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(str(o["status"]), "pending") {
		return nil, errors.New("non-pending order cannot be modified")
	}
	user := str(o["user_id"])
	pm, err := db.paymentMethod(user, method)
	if err != nil {
		return nil, err
	}
	h := payments(o)
	first, _ := func() (map[string]any, bool) {
		if len(h) != 1 {
			return nil, false
		}
		m, ok := h[0].(map[string]any)
		return m, ok
	}()
	if first == nil || str(first["transaction_type"]) != "payment" {
		return nil, errors.New("there should be exactly one payment for a pending order")
	}
	old := str(first["payment_method_id"])
	if old == method {
		return nil, errors.New("the new payment method should be different from the current one")
	}
	amount := num(first["amount"])
	if isGiftCard(pm) && num(pm["balance"]) < amount {
		return nil, errors.New("insufficient gift card balance to pay for the order")
	}
	o["payment_history"] = append(h, payment("payment", amount, method), payment("refund", amount, old))
	if isGiftCard(pm) {
		pm["balance"] = round2(num(pm["balance"]) - amount)
	}
	if opm, err := db.paymentMethod(user, old); err == nil && isGiftCard(opm) {
		opm["balance"] = round2(num(opm["balance"]) + amount)
	}
	return o, nil
}

// modifyUserAddress changes a user's default address.
func (db *DB) modifyUserAddress(userID string, addr map[string]any) (any, error) {
	u, err := db.user(userID)
	if err != nil {
		return nil, err
	}
	u["address"] = addr
	return u, nil
}

// returnItems requests the return of a delivered order's items.
func (db *DB) returnItems(orderID string, itemIDs []string, method string) (any, error) {
	o, err := db.order(orderID)
	if err != nil {
		return nil, err
	}
	if str(o["status"]) != "delivered" {
		return nil, errors.New("non-delivered order cannot be returned")
	}
	pm, err := db.paymentMethod(str(o["user_id"]), method)
	if err != nil {
		return nil, err
	}
	h := payments(o)
	var original string
	if len(h) > 0 {
		m, _ := h[0].(map[string]any)
		original = str(m["payment_method_id"])
	}
	if !isGiftCard(pm) && method != original {
		return nil, errors.New("payment method should be the original payment method")
	}
	if err := haveItems(o, itemIDs); err != nil {
		return nil, err
	}
	o["status"] = "return requested"
	o["return_items"] = sortedAny(itemIDs)
	o["return_payment_method_id"] = method
	return o, nil
}

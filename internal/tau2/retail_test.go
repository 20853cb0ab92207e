package tau2

import (
	"testing"
)

func miniDB(t *testing.T) *DB {
	t.Helper()
	db, err := Load("../../testdata/tau2/db.json")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestRetailWrites: the writes change what the benchmark documents, and a
// refused write changes nothing.
func TestRetailWrites(t *testing.T) {
	t.Parallel()
	db := miniDB(t)
	gift := func() float64 {
		return num(db.Users["ada_lovelace_1815"]["payment_methods"].(map[string]any)["gift_card_100"].(map[string]any)["balance"])
	}
	if _, err := db.Call("cancel_pending_order", map[string]any{"order_id": "#W0000001", "reason": "no longer needed"}); err != nil {
		t.Fatal(err)
	}
	if o := db.Orders["#W0000001"]; o["status"] != "cancelled" || len(payments(o)) != 2 || gift() != 140 {
		t.Errorf("cancel: status %v, payments %v, gift card %v", o["status"], payments(o), gift())
	}
	before := db.Clone()
	if _, err := db.Call("cancel_pending_order", map[string]any{"order_id": "#W0000001", "reason": "no longer needed"}); err == nil || !db.Equal(before) {
		t.Errorf("a second cancel: %v, changed %v", err, !db.Equal(before))
	}
	if _, err := db.Call("modify_pending_order_items", map[string]any{"order_id": "#W0000002", "item_ids": []any{"2000000001"},
		"new_item_ids": []any{"2000000002"}, "payment_method_id": "gift_card_100"}); err != nil {
		t.Fatal(err)
	}
	o := db.Orders["#W0000002"]
	if it := items(o)[0]; o["status"] != "pending (item modified)" || it["item_id"] != "2000000002" || it["price"] != 45.5 || gift() != 134.5 {
		t.Errorf("modify items: %v %v, gift card %v", o["status"], it, gift())
	}
	if _, err := db.Call("exchange_delivered_order_items", map[string]any{"order_id": "#W0000003", "item_ids": []any{"2000000001"},
		"new_item_ids": []any{"2000000003"}, "payment_method_id": "credit_card_200"}); err == nil {
		t.Error("an unavailable item was exchanged for")
	}
	if _, err := db.Call("return_delivered_order_items", map[string]any{"order_id": "#W0000003", "item_ids": []any{"2000000001"}, "payment_method_id": "gift_card_100"}); err != nil {
		t.Fatal(err)
	}
	if o := db.Orders["#W0000003"]; o["status"] != "return requested" || o["return_payment_method_id"] != "gift_card_100" {
		t.Errorf("return: %v", o)
	}
	if got, err := db.Call("calculate", map[string]any{"expression": "(45.5 - 40) * 2 / 3"}); err != nil || got != "3.67" {
		t.Errorf("calculate: %v %v", got, err)
	}
	if got, err := db.Call("find_user_id_by_name_zip", map[string]any{"first_name": "ada", "last_name": "LOVELACE", "zip": "10001"}); err != nil || got != "ada_lovelace_1815" {
		t.Errorf("find by name: %v %v", got, err)
	}
}

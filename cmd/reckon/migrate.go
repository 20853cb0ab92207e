package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/seed-7bc021c3/reckon/migrations"
)

func runMigrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	create := fs.Bool("create-db", false, "create the database when it is missing")
	s, err := prologue(fs, args)
	if err != nil {
		return err
	}
	if err := s.openPool(ctx, *create); err != nil {
		return err
	}
	defer s.close()
	applied, err := migrations.Apply(ctx, s.pool)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Println("migrations: up to date")
	} else {
		fmt.Printf("migrations: applied %v\n", applied)
	}
	return nil
}

// Reads and writes a SQLite file with the sqlite3 module mcp-sqlite uses,
// outside any MCP server: reckon's tests and drills seed the file before
// a run and read it back afterwards as the ground truth.
//   node sqlite-db.cjs exec DB   < SQL    runs the statements of SQL
//   node sqlite-db.cjs dump DB TABLE      prints TABLE's rows as JSON, by rowid
const sqlite3 = require('sqlite3');

const [mode, file, table] = process.argv.slice(2);
const db = new sqlite3.Database(file, (err) => { if (err) fail(err); });

function fail(err) {
  process.stderr.write(`sqlite-db: ${err.message}\n`);
  process.exit(1);
}

if (mode === 'exec') {
  let sql = '';
  process.stdin.on('data', (d) => { sql += d; });
  process.stdin.on('end', () => db.exec(sql, (err) => { if (err) fail(err); db.close(); }));
} else if (mode === 'dump' && table) {
  db.all(`SELECT * FROM "${table.replace(/"/g, '""')}" ORDER BY rowid`, (err, rows) => {
    if (err) fail(err);
    process.stdout.write(JSON.stringify(rows) + '\n');
    db.close();
  });
} else {
  fail(new Error('usage: sqlite-db.cjs exec DB < SQL | dump DB TABLE'));
}

// Drives the dpsql PostgreSQL-wire server through pgJDBC the way BI tools do (tests/clients/test_jdbc.py).
// Usage: java -cp postgresql.jar:. DpsqlJdbc JDBC_URL USER PASSWORD
import java.sql.*;
import java.util.Properties;

public class DpsqlJdbc {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.setProperty("user", args[1]);
        props.setProperty("password", args[2]);
        try (Connection con = DriverManager.getConnection(args[0], props)) {
            System.out.println("CONNECTED " + con.getMetaData().getDatabaseProductVersion());
            try (Statement st = con.createStatement();
                 ResultSet rs = st.executeQuery(
                     "SELECT carrier, dp_count(dep_delay, epsilon := 0.5) AS n FROM flights GROUP BY carrier ORDER BY carrier")) {
                while (rs.next()) {
                    System.out.println("DP " + rs.getString(1) + " " + rs.getDouble(2));
                }
                SQLWarning w = st.getWarnings();
                while (w != null) {
                    System.out.println("NOTICE " + w.getMessage());
                    w = w.getNextWarning();
                }
            }
            try (Statement st = con.createStatement()) {
                st.executeQuery("SELECT dep_delay FROM flights");
                System.out.println("REJECT none");
            } catch (SQLException e) {
                System.out.println("REJECT " + e.getSQLState() + " " + e.getMessage().split("\n")[0]);
            }
            try (PreparedStatement ps = con.prepareStatement(
                     "SELECT dp_count(dep_delay, epsilon := ?) AS n FROM flights WHERE carrier = ? AND month >= ?")) {
                for (int i = 0; i < 7; i++) {
                    ps.setDouble(1, 0.125);
                    ps.setString(2, "UA");
                    ps.setInt(3, 0);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                        System.out.println("PARAM " + i + " " + rs.getDouble(1));
                    }
                }
            }
            DatabaseMetaData md = con.getMetaData();
            try (ResultSet rs = md.getTables(null, null, "%", new String[] {"TABLE"})) {
                while (rs.next()) {
                    System.out.println("TABLE " + rs.getString("TABLE_SCHEM") + "." + rs.getString("TABLE_NAME"));
                }
            }
            try (ResultSet rs = md.getColumns(null, null, "flights", "%")) {
                while (rs.next()) {
                    System.out.println("COLUMN " + rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME"));
                }
            }
            con.setAutoCommit(false);
            try (Statement st = con.createStatement()) {
                st.setFetchSize(1);  // a named portal fetched one row per Execute (PortalSuspended in between)
                try (ResultSet rs = st.executeQuery(
                         "SELECT carrier, dp_count(dep_delay, epsilon := 0.25) FROM flights GROUP BY carrier ORDER BY 1")) {
                    StringBuilder sb = new StringBuilder("TXN");
                    while (rs.next()) {
                        sb.append(" ").append(rs.getString(1)).append("=").append(rs.getDouble(2));
                    }
                    System.out.println(sb);
                }
            }
            con.commit();
        }
    }
}

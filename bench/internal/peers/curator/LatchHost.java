import java.io.BufferedReader;
import java.io.BufferedOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.retry.ExponentialBackoffRetry;

/**
 * Hosts many Curator LeaderLatch candidates in one JVM, driven over
 * stdin/stdout, one command or answer per line.
 *
 * <pre>
 * in:  REQ new CID SESSION_MS CONNECTION_MS CONNECT_STRING
 *      REQ share CID OWNER            a candidate on OWNER's client (close leaves the client open)
 *      REQ start CID GEN PATH ID      a new LeaderLatch, started
 *      REQ release CID                LeaderLatch.close(); answers the nanoTime taken just before
 *      REQ close CID                  closes the latch (if any) and the client, if its own
 *      REQ ping
 *      REQ now                        answers System.nanoTime()
 * out: r REQ ok [VALUE]  |  r REQ err MESSAGE
 *      e CID GEN leader NANOS         LeaderLatchListener.isLeader, System.nanoTime() on entry
 *      e CID GEN notleader NANOS
 * </pre>
 *
 * Commands run on a thread pool, so one slow command (a client whose
 * connection is cut) does not hold up the others. End of input ends the JVM.
 */
public final class LatchHost {
    private static final PrintStream OUT =
            new PrintStream(new BufferedOutputStream(System.out, 1 << 16), false, StandardCharsets.UTF_8);

    private static final class Candidate {
        final String cid;
        final CuratorFramework client;
        final boolean owned; // close closes the client
        volatile LeaderLatch latch;

        Candidate(String cid, CuratorFramework client, boolean owned) {
            this.cid = cid;
            this.client = client;
            this.owned = owned;
        }
    }

    private static final Map<String, Candidate> CANDIDATES = new ConcurrentHashMap<>();

    private static void emit(String line) {
        synchronized (OUT) {
            OUT.print(line);
            OUT.print('\n');
            OUT.flush();
        }
    }

    public static void main(String[] args) throws Exception {
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "latchhost-command");
            t.setDaemon(true);
            return t;
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            final String[] f = line.trim().split(" ");
            if (f.length < 2) {
                continue;
            }
            pool.execute(() -> {
                String req = f[0];
                try {
                    String v = run(f);
                    emit("r " + req + " ok" + (v.isEmpty() ? "" : " " + v));
                } catch (Throwable e) {
                    String msg = (e.getClass().getSimpleName() + ": " + e.getMessage()).replace('\n', ' ');
                    emit("r " + req + " err " + msg);
                }
            });
        }
        // Go side closed our input: it is gone or closing.
        Runtime.getRuntime().halt(0);
    }

    private static Candidate get(String cid) {
        Candidate c = CANDIDATES.get(cid);
        if (c == null) {
            throw new IllegalArgumentException("no candidate " + cid);
        }
        return c;
    }

    private static String run(String[] f) throws Exception {
        switch (f[1]) {
        case "ping":
            return "";
        case "now":
            return Long.toString(System.nanoTime());
        case "new": {
            String cid = f[2];
            int sessionMs = Integer.parseInt(f[3]);
            int connMs = Integer.parseInt(f[4]);
            CuratorFramework client = CuratorFrameworkFactory.builder()
                    .connectString(f[5])
                    .sessionTimeoutMs(sessionMs)
                    .connectionTimeoutMs(connMs)
                    .retryPolicy(new ExponentialBackoffRetry(1000, 3))
                    .build();
            client.start();
            if (!client.blockUntilConnected(connMs, TimeUnit.MILLISECONDS)) {
                client.close();
                throw new IllegalStateException("not connected to " + f[5] + " within " + connMs + " ms");
            }
            CANDIDATES.put(cid, new Candidate(cid, client, true));
            return "";
        }
        case "share": {
            Candidate owner = get(f[3]);
            CANDIDATES.put(f[2], new Candidate(f[2], owner.client, false));
            return "";
        }
        case "start": {
            Candidate c = get(f[2]);
            final String gen = f[3];
            LeaderLatch latch = new LeaderLatch(c.client, f[4], f[5]);
            latch.addListener(new LeaderLatchListener() {
                @Override
                public void isLeader() {
                    long t = System.nanoTime();
                    emit("e " + c.cid + " " + gen + " leader " + t);
                }

                @Override
                public void notLeader() {
                    long t = System.nanoTime();
                    emit("e " + c.cid + " " + gen + " notleader " + t);
                }
            });
            c.latch = latch;
            latch.start();
            return "";
        }
        case "release": {
            Candidate c = get(f[2]);
            LeaderLatch latch = c.latch;
            if (latch == null) {
                throw new IllegalStateException("candidate " + c.cid + " has no latch");
            }
            c.latch = null;
            long t = System.nanoTime();
            latch.close();
            return Long.toString(t);
        }
        case "close": {
            Candidate c = CANDIDATES.remove(f[2]);
            if (c == null) {
                return "";
            }
            LeaderLatch latch = c.latch;
            c.latch = null;
            try {
                if (latch != null) {
                    latch.close();
                }
            } finally {
                if (c.owned) {
                    c.client.close();
                }
            }
            return "";
        }
        default:
            throw new IllegalArgumentException("unknown command " + f[1]);
        }
    }
}

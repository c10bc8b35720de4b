// What G1 does with a growing backlog of pending sends in a client JVM of the harness's heap.
// java -Xms1g -Xmx1g -XX:+UseG1GC -XX:ActiveProcessorCount=2 G1Backlog.java SENDS GROWTH ALLOC_KIB [HOLD]
// Serves SENDS sends as fast as it can; each allocates ALLOC_KIB of short-lived objects (the send's work)
// and one pending send (~3 KiB of small objects: a message with its properties map, a request header and
// the encoded request, a future and a callback) that waits in a FIFO (a LinkedBlockingQueue, as the async
// sender executor's queue) and ends later. GROWTH pending sends are added per send served (the backlog's
// growth: (offered - served) / served), up to HOLD pending sends (default unbounded), from HOLD on one
// ends per send served. Prints one CSV line per collection (from the JVM's own notifications): the sends
// served so far, the backlog, the collector and its cause, the pause (ms) and the heap's pools before /
// after (MiB); and at the end the sends served, the wall, the JVM's total collection counts and times, and
// the CPU its threads used by name (the collector's concurrent threads included).
import com.sun.management.GarbageCollectionNotificationInfo;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryUsage;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import javax.management.NotificationEmitter;
import javax.management.openmbean.CompositeData;

public class G1Backlog {
    static volatile long served;
    static volatile long backlog;

    static final class Header {
        String topic, group, props;
        int queueId, sysFlag, flag, reconsume;
        long bornTs;
        Header(String topic, int q, String props) { this.topic = topic; this.queueId = q; this.props = props; this.group = "g"; this.bornTs = System.nanoTime(); }
    }

    static final class Pending {  // what one send holds from its hand-off to its end
        final Map<String, String> properties = new HashMap<>();
        final Header header;
        final byte[] request;
        final Object future = new Object[4];
        final Runnable callback;
        Pending(long i) {
            properties.put("seq", Long.toString(i));
            properties.put("UNIQ_KEY", "7F0000010001" + Long.toHexString(i * 2654435761L) + "00000000");
            properties.put("WAIT", "true");
            String props = properties.toString();
            header = new Header("TopicTest", (int) (i & 3), props);
            request = new byte[2048];  // the encoded request (body 1 KiB, header, properties), as the estimate
            callback = () -> { if (request.length < 0) System.out.println(); };
        }
    }

    static long mib(MemoryUsage u) { return u == null ? -1 : u.getUsed() >> 20; }

    static String pools(Map<String, MemoryUsage> m) {
        return mib(m.get("G1 Eden Space")) + "," + mib(m.get("G1 Survivor Space")) + "," + mib(m.get("G1 Old Gen"));
    }

    public static void main(String[] args) throws Exception {
        long sends = Long.parseLong(args[0]);
        double growth = Double.parseDouble(args[1]);
        double allocKib = Double.parseDouble(args[2]);
        long hold = args.length > 3 ? Long.parseLong(args[3]) : Long.MAX_VALUE;
        System.out.println("served,backlog,gc,action,cause,pause_ms,eden_before,surv_before,old_before,eden_after,surv_after,old_after");
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            ((NotificationEmitter) gc).addNotificationListener((n, hb) -> {
                if (!n.getType().equals(GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION)) return;
                GarbageCollectionNotificationInfo info = GarbageCollectionNotificationInfo.from((CompositeData) n.getUserData());
                System.out.println(served + "," + backlog + "," + info.getGcName().replace(' ', '_') + ","
                        + info.getGcAction().replace(' ', '_') + "," + info.getGcCause().replace(' ', '_') + ","
                        + info.getGcInfo().getDuration() + "," + pools(info.getGcInfo().getMemoryUsageBeforeGc()) + ","
                        + pools(info.getGcInfo().getMemoryUsageAfterGc()));
            }, null, null);
        }
        int chunk = 512;
        int chunks = (int) Math.round(allocKib * 1024 / chunk);
        LinkedBlockingQueue<Pending> queue = new LinkedBlockingQueue<>();
        double owed = 0;
        long sink = 0;
        long t0 = System.nanoTime();
        for (long i = 0; i < sends; i++) {
            for (int c = 0; c < chunks; c++) {  // the send's short-lived work
                byte[] b = new byte[chunk - 16];
                b[c & 15] = (byte) i;
                sink += b[(int) (i & 15)];
            }
            owed += 1.0 + growth;  // pending sends handed to the client per send served
            while (owed >= 1.0) { queue.add(new Pending(i)); owed -= 1.0; }
            if (queue.size() > hold || growth == 0.0 && queue.size() > 1) sink += queue.poll().request.length;
            if (queue.size() > hold) sink += queue.poll().request.length;
            served = i + 1;
            backlog = queue.size();
        }
        double wall = (System.nanoTime() - t0) / 1e9;
        StringBuilder sb = new StringBuilder("# served " + sends + " wall_s " + String.format("%.2f", wall) + " backlog " + queue.size());
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans())
            sb.append(" | ").append(gc.getName()).append(" count=").append(gc.getCollectionCount()).append(" ms=").append(gc.getCollectionTime());
        System.out.println(sb + " sink " + (sink & 1));
        System.out.println(threadCpu());
    }

    /** CPU seconds (user + system) of the JVM's threads by name, from /proc (Linux): the collector's
     * stop-the-world workers ("GC Thread#n"), its concurrent marking ("G1 Conc#n", "G1 Main Marker"),
     * refinement ("G1 Refine#n") and service threads, and the program's own ("main"). */
    static String threadCpu() throws java.io.IOException {
        Map<String, Double> cpu = new java.util.TreeMap<>();
        double tick = 100.0;  // USER_HZ
        try (java.nio.file.DirectoryStream<java.nio.file.Path> tasks =
                java.nio.file.Files.newDirectoryStream(java.nio.file.Paths.get("/proc/self/task"))) {
            for (java.nio.file.Path t : tasks) {
                String name = new String(java.nio.file.Files.readAllBytes(t.resolve("comm"))).trim();
                String stat = new String(java.nio.file.Files.readAllBytes(t.resolve("stat")));
                String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                double s = (Long.parseLong(f[11]) + Long.parseLong(f[12])) / tick;  // utime, stime
                cpu.merge(name.replaceAll("#\\d+$", "#n"), s, Double::sum);
            }
        }
        StringBuilder sb = new StringBuilder("# thread CPU s:");
        cpu.forEach((k, v) -> { if (v > 0) sb.append(String.format(" %s=%.2f", k.replace(' ', '_'), v)); });
        return sb.toString();
    }
}

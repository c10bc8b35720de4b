import io.netty.bootstrap.Bootstrap;
import io.netty.channel.*;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.io.*;
import java.lang.management.*;
import java.net.*;
import java.text.SimpleDateFormat;
import java.util.*;
import java.util.concurrent.*;

/** What a storm of failed sync sends costs a 4.9.8 client's host, and what it does to a connect made during it.
 *  Each round, THREADS threads fail at once as the sender threads do when a closed channel fails their
 *  requests: each creates a RemotingSendRequestException-like exception at the client's stack depth and logs
 *  what 4.9.8 logs for it at LEVEL (DefaultMQProducerImpl.sendDefaultImpl's "sendKernelImpl exception, resend
 *  at once" with the exception, then the message; NettyRemotingClient.invokeSync's "send request exception, so
 *  close the channel"; at INFO also closeChannel's two lines) through a logger built as the client's is
 *  (ClientLogger: a non-blocking AsyncAppender, queue 1024, whose one dispatcher thread formats each event with
 *  LoggingBuilder.DefaultLayout, the stack trace one line per frame, and writes it to a file, flushed per
 *  event). The main thread meanwhile makes a Netty loopback connect (as NettyConnect.java, the connect_time
 *  folder) and times it; before the storm it makes one alone. Prints per round: the failing threads' CPU per
 *  failure (ThreadMXBean), the dispatcher's CPU per failure, the connect alone and the connect in the storm.
 *  Usage: java -cp <netty jars> FailureStorm.java LEVEL ROUNDS THREADS BODY_BYTES LOGFILE */
public class FailureStorm {
    static final ThreadMXBean MX = ManagementFactory.getThreadMXBean();

    // ---- a logger as the 4.9.8 client's (logging module: LoggingBuilder.AsyncAppender + DefaultLayout) ----
    static final class Event {
        final long time = System.currentTimeMillis(); final String level, logger, message; final Throwable thrown;
        Event(String level, String logger, String message, Throwable thrown) {
            this.level = level; this.logger = logger; this.message = message; this.thrown = thrown; }
    }
    static final List<Event> BUFFER = new ArrayList<>();
    static final int BUFFER_SIZE = 1024;
    static volatile boolean INFO;
    static Writer OUT;
    static Thread DISPATCHER;
    static volatile long DISPATCHED;

    static void log(String level, String message, Throwable thrown) {
        if (level.equals("INFO") && !INFO) return;
        Event e = new Event(level, "RocketmqClient", message, thrown);
        synchronized (BUFFER) {
            if (BUFFER.size() < BUFFER_SIZE) { BUFFER.add(e); if (BUFFER.size() == 1) BUFFER.notifyAll(); }
        }
    }
    static String format(Event e) {  // LoggingBuilder.DefaultLayout.format
        StringBuilder sb = new StringBuilder();
        sb.append(new SimpleDateFormat("yyyy-MM-dd HH:mm:ss,SSS").format(new Date(e.time)));
        sb.append(' ').append(e.level).append(' ').append(e.logger).append(" - ").append(e.message);
        if (e.thrown != null) {  // ThrowableInformation.getThrowableStrRep: printStackTrace, one line per frame
            StringWriter sw = new StringWriter(); e.thrown.printStackTrace(new PrintWriter(sw));
            sb.append("\r\n");
            for (String line : sw.toString().split("\n")) sb.append(line.trim()).append("\r\n");
        }
        return sb.append("\r\n").toString();
    }
    static void dispatch() {
        List<Event> batch = new ArrayList<>();
        while (true) {
            synchronized (BUFFER) {
                while (BUFFER.isEmpty()) { try { BUFFER.wait(); } catch (InterruptedException x) { return; } }
                batch.addAll(BUFFER); BUFFER.clear();
            }
            for (Event e : batch) {
                try { OUT.write(format(e)); OUT.flush(); } catch (IOException x) { throw new UncheckedIOException(x); }
            }
            DISPATCHED += batch.size(); batch.clear();
        }
    }

    // ---- a failure at the client's depth ----
    static final class RemotingSendRequestException extends Exception {
        RemotingSendRequestException(String m) { super(m); } }
    static final byte[] BODY_SEED = new byte[0];
    static void invoke(int depth) throws RemotingSendRequestException {  // sendDefaultImpl .. invokeSyncImpl
        if (depth > 0) { invoke(depth - 1); return; }
        throw new RemotingSendRequestException("send request to <127.0.0.1:10911> failed");
    }
    static void failOnce(byte[] body, Map<String, String> props) {
        long begin = System.currentTimeMillis();
        try {
            invoke(10);  // with the pool's frames and the caller's: ~20 frames, as the client's trace
        } catch (RemotingSendRequestException e) {
            log("WARN", "invokeSync: send request exception, so close the channel[127.0.0.1:10911]", null);
            log("INFO", "closeChannel: begin close the channel[127.0.0.1:10911] Found: false", null);
            log("INFO", "closeChannel: the channel[127.0.0.1:10911] has been removed from the channel table before", null);
            long end = System.currentTimeMillis();
            log("WARN", String.format("sendKernelImpl exception, resend at once, InvokeID: %s, RT: %sms, Broker: %s",
                ThreadLocalRandom.current().nextLong(), end - begin,
                "MessageQueue [topic=BenchTopic, brokerName=broker-a, queueId=1]"), e);
            log("WARN", "Message{topic='BenchTopic', flag=0, properties=" + props + ", body=" + Arrays.toString(body)
                + ", transactionId='null'}", null);  // Message.toString
        }
    }

    static void connectOnce(Bootstrap b, InetSocketAddress addr) {
        ChannelFuture f = b.connect(addr);
        f.awaitUninterruptibly(3000);
        f.channel().close().awaitUninterruptibly();
    }

    public static void main(String[] a) throws Exception {
        INFO = a[0].equals("INFO");
        int rounds = Integer.parseInt(a[1]), threads = Integer.parseInt(a[2]), size = Integer.parseInt(a[3]);
        OUT = new OutputStreamWriter(new FileOutputStream(a[4], true));
        DISPATCHER = new Thread(FailureStorm::dispatch, "AsyncAppender-Dispatcher");
        DISPATCHER.setDaemon(true); DISPATCHER.start();
        ServerSocket server = new ServerSocket(0, 1024, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(() -> { try { while (true) server.accept(); } catch (Exception e) { } });
        acceptor.setDaemon(true); acceptor.start();
        NioEventLoopGroup group = new NioEventLoopGroup(1);
        Bootstrap b = new Bootstrap().group(group).channel(NioSocketChannel.class)
            .option(ChannelOption.TCP_NODELAY, true).option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 3000)
            .handler(new ChannelInitializer<SocketChannel>() {
                public void initChannel(SocketChannel ch) { ch.pipeline().addLast(new ChannelDuplexHandler()); } });
        InetSocketAddress addr = new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort());
        connectOnce(b, addr);  // Netty's first
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        byte[] body = new byte[size]; new Random(1).nextBytes(body);
        Map<String, String> props = new HashMap<>();
        props.put("WAIT", "true"); props.put("seq", "2510"); props.put("UNIQ_KEY", "7F0000017A2B18B4AAC25E4F1C2A0000");
        System.out.printf("# level %s, %d threads, body %d B, %d rounds; per round: failing threads' CPU per failure"
            + " (us, mean), dispatcher's CPU per failure (us), connect alone (ms), connect in the storm (ms),"
            + " storm wall (ms)%n", a[0], threads, size, rounds);
        for (int r = 0; r < rounds; r++) {
            long c0 = System.nanoTime();
            connectOnce(b, addr);
            double alone = (System.nanoTime() - c0) / 1e6;
            Thread.sleep(20);
            long d0 = MX.getThreadCpuTime(DISPATCHER.getId()), dispatched0 = DISPATCHED;
            CyclicBarrier go = new CyclicBarrier(threads + 1);
            List<Future<Long>> cpu = new ArrayList<>();
            for (int t = 0; t < threads; t++) cpu.add(pool.submit(() -> {
                go.await();
                long t0 = MX.getCurrentThreadCpuTime();
                failOnce(body, props);
                return MX.getCurrentThreadCpuTime() - t0;
            }));
            go.await();
            long s0 = System.nanoTime();
            ChannelFuture f = b.connect(addr);  // the retry that starts the new channel's connect
            f.awaitUninterruptibly(3000);
            double storm = (System.nanoTime() - s0) / 1e6;
            long sum = 0;
            for (Future<Long> c : cpu) sum += c.get();
            long expected = dispatched0 + (long) threads * (INFO ? 5 : 3);
            while (DISPATCHED < expected) Thread.sleep(1);
            double wall = (System.nanoTime() - s0) / 1e6;
            long d1 = MX.getThreadCpuTime(DISPATCHER.getId());
            f.channel().close().awaitUninterruptibly();
            System.out.printf("%d %.1f %.1f %.3f %.3f %.3f%n", r + 1, sum / 1e3 / threads, (d1 - d0) / 1e3 / threads,
                alone, storm, wall);
            Thread.sleep(30);
        }
        group.shutdownGracefully(); pool.shutdownNow(); System.exit(0);
    }
}

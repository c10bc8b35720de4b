import io.netty.bootstrap.Bootstrap;
import io.netty.channel.*;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.net.*;
import java.util.*;
import java.util.concurrent.*;

/** Netty client connects on loopback, as NettyRemotingClient.createChannel makes them: bootstrap.connect,
 *  then awaitUninterruptibly by the caller (and by `waiters` other threads). Prints ms per connect. */
public class NettyConnect {
    public static void main(String[] a) throws Exception {
        int reps = Integer.parseInt(a[0]), waiters = Integer.parseInt(a[1]);
        ServerSocket server = new ServerSocket(0, 1024, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(() -> { try { while (true) server.accept(); } catch (Exception e) { } });
        acceptor.setDaemon(true); acceptor.start();
        NioEventLoopGroup group = new NioEventLoopGroup(1);
        Bootstrap b = new Bootstrap().group(group).channel(NioSocketChannel.class)
            .option(ChannelOption.TCP_NODELAY, true).option(ChannelOption.SO_KEEPALIVE, false)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 3000)
            .handler(new ChannelInitializer<SocketChannel>() {
                public void initChannel(SocketChannel ch) { ch.pipeline().addLast(new ChannelDuplexHandler()); }
            });
        InetSocketAddress addr = new InetSocketAddress(InetAddress.getLoopbackAddress(), server.getLocalPort());
        ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, waiters));
        double[] ms = new double[reps];
        for (int i = 0; i < reps; i++) {
            long t0 = System.nanoTime();
            ChannelFuture f = b.connect(addr);
            List<Future<?>> ws = new ArrayList<>();
            for (int w = 0; w < waiters; w++) ws.add(pool.submit(() -> f.awaitUninterruptibly(3000)));
            f.awaitUninterruptibly(3000);
            for (Future<?> w : ws) w.get();
            ms[i] = (System.nanoTime() - t0) / 1e6;
            f.channel().close().awaitUninterruptibly();
            Thread.sleep(5);
        }
        System.out.printf("first %.3f ms; ", ms[0]);
        double[] warm = Arrays.copyOfRange(ms, 1, reps); Arrays.sort(warm);
        System.out.printf("the other %d: median %.3f ms, p90 %.3f, max %.3f%n", warm.length, warm[warm.length / 2],
            warm[(int) (warm.length * 0.9)], warm[warm.length - 1]);
        group.shutdownGracefully(); pool.shutdownNow(); System.exit(0);
    }
}

package gregor.share;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Reads a topic with several KafkaShareConsumers of one share group, each in its own thread,
 * every record accepted (implicit acknowledgement: a poll accepts what the previous one
 * returned, and commitSync accepts what the last one returned before close, which would
 * release it). Prints "R consumer partition offset deliveryCount" for each record
 * received and "DONE" once the records seen number the count asked for and every consumer is
 * closed.
 *
 * Usage: Check bootstrap topic group consumers records timeoutSeconds
 *        Check hold bootstrap topic group
 *        Check groupconfig bootstrap group key value
 *
 * In hold mode one consumer with explicit acknowledgement polls until it receives records,
 * prints "H offset deliveryCount" for each and "HELD", and then holds them unacknowledged
 * until the process is killed.
 *
 * In groupconfig mode the Admin client sets key=value on the group's config resource
 * (incrementalAlterConfigs on ConfigResource.Type.GROUP), prints "C name value source" for
 * every config describeConfigs returns for the group, then tries to set key to an invalid
 * value and prints "E " and the exception's class name.
 */
public final class Check {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("hold")) {
            hold(args[1], args[2], args[3]);
            return;
        }
        if (args[0].equals("groupconfig")) {
            groupConfig(args[1], args[2], args[3], args[4]);
            return;
        }
        String bootstrap = args[0], topic = args[1], group = args[2];
        int consumers = Integer.parseInt(args[3]);
        int records = Integer.parseInt(args[4]);
        long deadline = System.nanoTime() + Duration.ofSeconds(Long.parseLong(args[5])).toNanos();
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicBoolean failed = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            int id = i;
            Thread t = new Thread(() -> {
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstrap);
                p.put("group.id", group);
                p.put("client.id", "share-" + id);
                p.put("key.deserializer", StringDeserializer.class.getName());
                p.put("value.deserializer", StringDeserializer.class.getName());
                // Small polls, so that every consumer gets a share of a small topic.
                p.put("max.poll.records", "5");
                p.put("fetch.max.bytes", "1024");
                try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
                    c.subscribe(List.of(topic));
                    while (seen.size() < records && System.nanoTime() < deadline) {
                        ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<String, String> r : rs) {
                            short n = r.deliveryCount().orElse((short) -1);
                            synchronized (System.out) {
                                System.out.println("R " + id + " " + r.partition() + " " + r.offset() + " " + n);
                                System.out.flush();
                            }
                            seen.add(r.partition() + "/" + r.offset());
                        }
                    }
                    // Accept what the last poll returned: close alone would release it.
                    c.commitSync();
                } catch (Exception e) {
                    failed.set(true);
                    e.printStackTrace();
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        if (failed.get()) {
            System.exit(1);
        }
        System.out.println("DONE");
    }

    private static void hold(String bootstrap, String topic, String group) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("client.id", "share-holder");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", "explicit");
        p.put("max.poll.records", "5");
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(topic));
        while (true) {
            ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
            if (rs.isEmpty()) {
                continue;
            }
            for (ConsumerRecord<String, String> r : rs) {
                System.out.println("H " + r.offset() + " " + r.deliveryCount().orElse((short) -1));
            }
            System.out.println("HELD");
            System.out.flush();
            Thread.sleep(Long.MAX_VALUE);
        }
    }

    private static void groupConfig(String bootstrap, String group, String key, String value) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
        try (Admin admin = Admin.create(p)) {
            admin.incrementalAlterConfigs(java.util.Map.of(res,
                List.of(new AlterConfigOp(new ConfigEntry(key, value), AlterConfigOp.OpType.SET)))).all().get();
            Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
            for (ConfigEntry e : cfg.entries()) {
                System.out.println("C " + e.name() + " " + e.value() + " " + e.source());
            }
            try {
                admin.incrementalAlterConfigs(java.util.Map.of(res,
                    List.of(new AlterConfigOp(new ConfigEntry(key, "not-valid"), AlterConfigOp.OpType.SET)))).all().get();
                System.out.println("E none");
            } catch (java.util.concurrent.ExecutionException e) {
                System.out.println("E " + e.getCause().getClass().getSimpleName());
            }
        }
        System.out.println("DONE");
        System.out.flush();
    }
}

// Confluent's Parallel Consumer on bench/parallel.rb's workload, for its PC
// rows: the topic bench/parallel.rb filled, a 10 ms sleep per record, an
// ordering and a concurrency. Compiled and run by bench/parallel.rb (javac at
// bench time, the jars of tmp/pc/lib: see bench/pc/README.md). Prints one line:
// "records seconds cpu_seconds violations peak_rss_kb", the rate over the
// time from the first record's start to the last counted record's end, the
// CPU (this JVM's, every thread, /proc/self/stat) over the same span.
//
//   java -cp tmp/pc/classes:tmp/pc/lib/* ParallelBench BROKERS TOPIC ORDERING CONCURRENCY RECORDS SECONDS
import io.confluent.parallelconsumer.ParallelConsumerOptions;
import io.confluent.parallelconsumer.ParallelConsumerOptions.CommitMode;
import io.confluent.parallelconsumer.ParallelConsumerOptions.ProcessingOrder;
import io.confluent.parallelconsumer.ParallelStreamProcessor;
import io.confluent.parallelconsumer.internal.DrainingCloseable.DrainingMode;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class ParallelBench {
  private static final long SLEEP_MS = 10;

  public static void main(String[] args) throws Exception {
    String brokers = args[0], topic = args[1];
    ProcessingOrder ordering = ProcessingOrder.valueOf(args[2].toUpperCase());
    int concurrency = Integer.parseInt(args[3]);
    long limit = Long.parseLong(args[4]);
    long seconds = (long) (Double.parseDouble(args[5]) * 1e9);

    Properties props = new Properties();
    props.put("bootstrap.servers", brokers);
    props.put("group.id", "sluice-bench-parallel-pc-" + UUID.randomUUID());
    props.put("auto.offset.reset", "earliest");
    props.put("enable.auto.commit", "false"); // PC commits itself
    props.put("key.deserializer", StringDeserializer.class.getName());
    props.put("value.deserializer", StringDeserializer.class.getName());
    ParallelConsumerOptions<String, String> options = ParallelConsumerOptions.<String, String>builder()
        .ordering(ordering).maxConcurrency(concurrency).commitMode(CommitMode.PERIODIC_CONSUMER_ASYNCHRONOUS)
        .consumer(new KafkaConsumer<>(props)).build();
    ParallelStreamProcessor<String, String> pc = ParallelStreamProcessor.createEosStreamProcessor(options);

    AtomicLong count = new AtomicLong();
    AtomicLong violations = new AtomicLong();
    AtomicLong started = new AtomicLong();
    AtomicLong startCpu = new AtomicLong();
    long[] end = new long[2];
    Map<String, Long> last = new ConcurrentHashMap<>();
    CountDownLatch done = new CountDownLatch(1);
    pc.subscribe(List.of(topic));
    pc.poll(context -> {
      ConsumerRecord<String, String> record = context.getSingleConsumerRecord();
      // The clock starts at the first record (not the group's join, which takes seconds).
      if (started.get() == 0 && started.compareAndSet(0, System.nanoTime())) startCpu.set(cpuTicks());
      String key = record.partition() + "/" + record.key();
      Long previous = last.put(key, record.offset());
      if (previous != null && previous > record.offset()) violations.incrementAndGet();
      try {
        Thread.sleep(SLEEP_MS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
      long n = count.incrementAndGet();
      if ((n == limit || (n < limit && System.nanoTime() - started.get() >= seconds)) && done.getCount() > 0) {
        synchronized (end) {
          if (done.getCount() > 0) {
            end[0] = System.nanoTime();
            end[1] = cpuTicks();
            done.countDown();
          }
        }
      }
    });
    done.await();
    long counted = count.get();
    double elapsed = (end[0] - started.get()) / 1e9;
    double cpu = (end[1] - startCpu.get()) / 100.0; // USER_HZ
    System.out.printf("%d %.3f %.3f %d %d%n", counted, elapsed, cpu, violations.get(), peakRssKb());
    System.out.flush();
    pc.close(Duration.ofSeconds(5), DrainingMode.DONT_DRAIN);
    System.exit(0);
  }

  // utime + stime of this process, in clock ticks (fields 14 and 15 of /proc/self/stat).
  private static long cpuTicks() {
    try {
      String stat = Files.readString(Paths.get("/proc/self/stat"));
      String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return Long.parseLong(fields[11]) + Long.parseLong(fields[12]);
    } catch (Exception e) {
      return 0;
    }
  }

  private static long peakRssKb() {
    try {
      for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
        if (line.startsWith("VmHWM:")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
      }
    } catch (Exception e) {
      // no /proc: 0
    }
    return 0;
  }
}

